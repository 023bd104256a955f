#pragma once
// Recorded device work: dispatches, copies and the barriers between them.

#include <vulkan/vulkan_core.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "buffer.h"
#include "detail/handle.h"
#include "ticket.h"

namespace vkt {

class Device;
class Kernel;

/// Workgroup counts of a dispatch.
using Groups = std::array<std::uint32_t, 3>;

/// A command buffer that is recorded once and submitted as often as wanted.
/// Barriers are inserted only where a command touches a buffer range that an
/// earlier command (since the last barrier) wrote, or writes one it read; which
/// bindings a kernel writes comes from the shader (`readonly` buffers are
/// reads). Each submission is ordered after the earlier ones of its queue and
/// makes its writes visible to the host when its ticket completes.
///
///   vkt::Stream step(device);
///   step.dispatch(saxpy, {x, y}, SaxpyParams{2.0f, n}, vkt::Stream::groups_for(saxpy, n));
///   for (int i = 0; i < 100; ++i) step.submit();   // replays, no re-recording
///   step.submit().wait();
class Stream {
 public:
  /// Submits to `queue`; a compute stream to the device's compute queue `lane`
  /// (below Device::compute_queues()).
  explicit Stream(Device& device, QueueKind queue = QueueKind::Compute, std::uint32_t lane = 0);
  ~Stream();
  Stream(Stream&& other) noexcept = default;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  /// Records `kernel` over `groups` workgroups with `buffers` bound in binding
  /// order and `push` as its push constants. Storage-buffer bindings take the
  /// range as is; `textureBuffer`/`samplerBuffer` bindings (uniform texel
  /// buffers, the fast loads on lavapipe) read it as RGBA32F texels. Throws vkt::Error when the
  /// buffers or the push-constant size do not match what the shader declares.
  void dispatch(const Kernel& kernel, std::span<const BufferRange> buffers,
                std::span<const std::byte> push, Groups groups);
  template <typename Push>
  void dispatch(const Kernel& kernel, std::initializer_list<BufferRange> buffers, const Push& push,
                Groups groups) {
    dispatch(kernel, std::span<const BufferRange>(buffers.begin(), buffers.size()),
             std::as_bytes(std::span<const Push>(&push, 1)), groups);
  }
  void dispatch(const Kernel& kernel, std::initializer_list<BufferRange> buffers, Groups groups) {
    dispatch(kernel, std::span<const BufferRange>(buffers.begin(), buffers.size()), {}, groups);
  }
  /// Enough workgroups of `kernel` for `threads` invocations of a 1-D problem,
  /// as a 2-D grid when x alone would pass the device's workgroup-count limit;
  /// the shader must then index with shaders/index.glsl's linear_index().
  static Groups linear_groups(const Kernel& kernel, std::uint64_t threads);
  /// Enough workgroups of `kernel` to cover `threads` invocations in x (y, z).
  static Groups groups_for(const Kernel& kernel, std::uint64_t threads_x,
                           std::uint64_t threads_y = 1, std::uint64_t threads_z = 1);

  /// Records a copy of `src` into `dst` (same size, same Device; for buffers on
  /// two devices use CrossDeviceCopy).
  void copy(BufferRange src, BufferRange dst);
  /// Records filling `dst` with a repeated 32-bit word (offset and size multiples of 4).
  void fill(BufferRange dst, std::uint32_t word);
  /// Records a full barrier whatever the hazards (rarely needed).
  void barrier();

  /// Ends the current segment. A submit sends every segment as its own batch,
  /// in order, each with its own ticket (segment_ticket()), so the host or another
  /// queue may take what a segment wrote while the later ones still run: how a
  /// step's backward pass hands over each gradient bucket as soon as it is
  /// written. Returns the index of the segment just ended.
  std::size_t end_segment();
  /// Segments so far (the one being recorded included).
  std::size_t segment_count() const { return segments_.size() + (ended_ ? 0 : 1); }
  /// The ticket of segment `k` in the last submission (empty before one).
  Ticket segment_ticket(std::size_t k) const;

  /// Records a timestamp taken when every command recorded before it is done
  /// (the Device must have DeviceInfo::timestamps). Returns its index for elapsed_ns().
  std::size_t timestamp();
  /// Nanoseconds between timestamp `from` and timestamp `to` in the last
  /// submission; waits for it. How long the device spent on the work between them.
  double elapsed_ns(std::size_t from, std::size_t to) const;

  /// What one profiled command took (profile_commands()).
  struct CommandTime {
    std::size_t command = 0;  ///< its index among the stream's commands (command_count())
    std::string label;        ///< the kernel's name, "copy" or "fill"
    /// Device nanoseconds from the end of the command before it (or of
    /// profile_commands()'s first timestamp) to its own end: the barrier it
    /// waited behind is counted with it. Where commands with no barrier
    /// between them overlap (a GPU), it is what this one added to the end.
    double ns = 0;
  };
  /// From here on records a timestamp after every command, so that
  /// command_times() can say where a submission's time went. Profiling costs a
  /// query write per command, so it is off unless asked for. Needs
  /// DeviceInfo::timestamps.
  void profile_commands();
  /// Every command recorded since profile_commands(), in order, timed in the
  /// last submission (which it waits for).
  std::vector<CommandTime> command_times() const;

  /// Ends recording on first use and submits; the ticket completes when the work
  /// is done. `waits` are tickets of this Device (other queue included) that the
  /// work must wait for on the device. Recording after a submit is an error.
  Ticket submit(std::span<const Ticket> waits = {});
  /// Submits segments [first, first + count) alone, for a run the host takes
  /// part in between segments (the sums across replicas inside a step): the
  /// host waits for one part, writes what the next part reads, submits it.
  /// Like submit(), ends recording on first use; segment_ticket() then names
  /// the latest submission of each segment.
  Ticket submit_segments(std::size_t first, std::size_t count, std::span<const Ticket> waits = {});
  /// submit() and wait.
  void run() { submit().wait(); }

  /// Commands recorded: dispatches, copies and fills.
  std::size_t command_count() const { return commands_; }
  /// Of command_count(), the dispatches.
  std::size_t dispatch_count() const { return dispatches_; }
  /// Barriers recorded between commands (hazards and barrier() calls).
  std::size_t barrier_count() const { return barriers_; }
  bool submitted() const { return ended_; }
  Device& device() const { return *device_; }

 private:
  struct Access {
    VkBuffer buffer;
    std::size_t offset;
    std::size_t bytes;
    bool write;
  };
  void check_recording(const char* what) const;
  void end_recording();
  void check_range(const BufferRange& range, const char* what) const;
  /// Inserts a barrier if `accesses` conflict with what ran since the last one.
  void order(std::span<const Access> accesses);
  void record_barrier(VkPipelineStageFlags dst_stage, VkAccessFlags dst_access,
                      bool counted = true);
  VkDescriptorSet allocate_set(VkDescriptorSetLayout layout);
  /// Queues a command of the current segment (see unrecorded_).
  void record(std::function<void(VkCommandBuffer)> command);
  /// Records the queued commands into the segment's command buffer and ends it.
  void end_commands();

  Device* device_;
  QueueKind queue_;
  std::uint32_t lane_ = 0;
  detail::DeviceHandle<VkCommandPool, vkDestroyCommandPool> pool_;
  std::vector<detail::DeviceHandle<VkDescriptorPool, vkDestroyDescriptorPool>> descriptor_pools_;
  std::vector<detail::DeviceHandle<VkBufferView, vkDestroyBufferView>> views_;
  // Timestamp queries, in pools of a fixed size made as the count grows.
  std::vector<detail::DeviceHandle<VkQueryPool, vkDestroyQueryPool>> query_pools_;
  std::size_t timestamps_ = 0;
  void read_timestamps(std::size_t first, std::span<std::uint64_t> values) const;
  // Profiling: the timestamp before the first profiled command, and each profiled
  // command's index, label and timestamp.
  struct Profiled {
    std::size_t command;
    std::string label;
    std::size_t timestamp;
  };
  void profile_command(std::string label);
  std::optional<std::size_t> profile_start_;
  std::vector<Profiled> profiled_;
  VkCommandBuffer commands_buffer_ = VK_NULL_HANDLE;  // freed with pool_; the last segment
  std::vector<VkCommandBuffer> segments_;             // the ended segments before it
  void begin_commands();
  bool transfer_only() const;
  VkPipelineStageFlags work_stages() const;
  VkAccessFlags work_access() const;
  std::vector<Access> pending_;
  // The current segment's commands, recorded into its command buffer only when
  // it ends: by then the pipelines its dispatches bind, which Device::kernel
  // builds on worker threads, have compiled side by side.
  std::vector<std::function<void(VkCommandBuffer)>> unrecorded_;
  std::string failed_;  // why recording the commands failed (the stream is unusable)
  Ticket last_;
  std::vector<std::uint64_t> segment_values_;  // each segment's latest timeline value
  std::size_t commands_ = 0;
  std::size_t dispatches_ = 0;
  std::size_t barriers_ = 0;
  bool ended_ = false;
};

}  // namespace vkt
