#pragma once
// One VkDevice on one physical device: queues, memory, kernel cache.

#include <vulkan/vulkan_core.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "device_info.h"
#include "ticket.h"
#include "tuning_cache.h"

namespace vkt {

class HostTransfer;
class Instance;
class Kernel;
struct KernelDesc;
class PipelineBuilder;
class PipelineCache;

/// How a Device is made.
/// The matmul kernels a Device's graphs record (runtime/graph/ops/matmul.h):
/// Auto takes Texel on lavapipe and Tiled elsewhere.
enum class MatmulKernels { Auto, Tiled, Texel };

/// "auto", "tiled" or "texel" as MatmulKernels; anything else is a vkt::Error
/// that names `source` (where the text came from) and the choices.
MatmulKernels parse_matmul_kernels(std::string_view text, std::string_view source);

/// How the kernels over rows (softmax, layer norm, the sparse cross-entropy)
/// take a row of 32 or more: Workgroup, 64 invocations and a fixed tree (a GPU
/// needs it on long rows); Invocation, one invocation a row (a CPU device runs
/// it 2-6x faster: a barrier there is a switch between lane groups). Auto:
/// Invocation on CPU devices, Workgroup elsewhere.
enum class RowKernels { Auto, Workgroup, Invocation };

/// "auto", "workgroup" or "invocation" as RowKernels; anything else is a
/// vkt::Error that names `source` and the choices.
RowKernels parse_row_kernels(std::string_view text, std::string_view source);

struct DeviceOptions {
  /// Treat device-local memory as unmappable even where the device could map it,
  /// so that uploads, downloads and cross-device copies take the staged path with
  /// copy commands that a discrete GPU needs. For testing that path on lavapipe.
  bool force_staging = false;
  /// Import host memory into the device (VK_EXT_external_memory_host) where it
  /// offers that: a copy between two Devices through host memory then goes
  /// source -> one host allocation both import -> destination, two device
  /// copies and no memcpy (CrossDeviceCopy). Off: through a staging buffer on
  /// each side and a memcpy between them.
  bool import_host_memory = true;
  /// Compute queues to make, at most as many as the device's compute family
  /// offers (NVIDIA 16, AMD 8, lavapipe 1): work submitted to different ones
  /// may run side by side (towers sharing one Device take one each). At least 1.
  std::uint32_t compute_queues = 1;
  /// The most bytes one host transfer of an unmapped buffer stages at once; a
  /// larger upload or download goes through in pieces of this size, so the
  /// reused staging buffer never exceeds it. At least 1.
  std::size_t staging_chunk_bytes = std::size_t{64} << 20;
  /// The largest range bound to one storage-buffer binding, in bytes: 0 keeps the
  /// device's maxStorageBufferRange; a smaller value makes the optimizers and the
  /// global norm split their arena windows as a device with that limit needs (for
  /// testing that path); a larger one is clamped to the device's. At least
  /// kMinStorageBufferRange.
  std::uint64_t max_storage_buffer_range = 0;
  static constexpr std::uint64_t kMinStorageBufferRange = 1024;
  /// The offset alignment of storage and texel buffer bindings, in bytes: 0
  /// keeps the device's (minStorageBufferOffsetAlignment,
  /// minTexelBufferOffsetAlignment); a larger power of two makes limits()
  /// report it, as a device with that alignment would (for testing towers on
  /// devices whose alignments differ); a smaller one is the device's own.
  std::uint64_t min_buffer_offset_alignment = 0;
  /// Where the Vulkan pipeline cache and the tuning cache of this device are
  /// kept between runs (files named after the device, its driver and the
  /// library version); unset or empty: in memory only. default_cache_dir()
  /// gives the user's cache directory; towers made without DeviceOptions use it.
  std::optional<std::filesystem::path> cache_dir{};
  /// The matmul kernels the Device's graphs record, e.g. Tiled to run the GPU
  /// kernels on lavapipe.
  MatmulKernels matmul = MatmulKernels::Auto;
  /// How row kernels take a row, e.g. Workgroup to run the GPU kernels on lavapipe.
  RowKernels row_kernels = RowKernels::Auto;
  /// Leave 16-bit storage buffers off where the device offers them, as on a
  /// device without them (info().storage_16bit false): for testing the half
  /// types' errors on lavapipe.
  bool disable_16bit_storage = false;
  /// Leave cooperative matrices (tensor cores) off where the device offers
  /// them (info().cooperative_f16 empty): half matmuls then take the scalar
  /// half kernel, e.g. to check one kernel against the other.
  bool disable_cooperative_matrix = false;
  /// Fault injection, for testing what survives a lost device: the submit
  /// with this number (counted from 1 over the Device's life) and every later
  /// one fail as on a device that was lost (VK_ERROR_DEVICE_LOST): nothing is
  /// submitted, lost() turns true and a vkt::DeviceLost is thrown. Work
  /// submitted before it runs to its end. Unset: no fault.
  std::optional<std::uint64_t> lose_device_at_submit{};

  /// VKT_FORCE_STAGING=1 sets force_staging, VKT_MATMUL_VARIANT=tiled, texel
  /// or auto sets matmul and VKT_ROW_KERNELS=workgroup, invocation or auto
  /// row_kernels (another value is a vkt::Error here, where the program makes
  /// its Devices, not when a step is recorded); the rest keep their defaults
  /// (no cache_dir: a bare Device writes nothing to disk).
  static DeviceOptions from_environment();
  /// Equal options make equal Devices (what TowerDevicePool reuses one for).
  bool operator==(const DeviceOptions&) const = default;
};

/// Vulkan objects the runtime has made on a Device so far. Counted as they are
/// made and never decreased, so equal counts before and after a piece of work
/// prove it made nothing (a replayed step, an evaluation batch, a loss read).
struct DeviceObjectCounts {
  std::uint64_t memory_allocations = 0;  ///< vkAllocateMemory: every Buffer, staging included
  std::uint64_t command_pools = 0;       ///< one per Stream, one for host transfers
  std::uint64_t command_buffers = 0;     ///< likewise
  std::uint64_t descriptor_pools = 0;    ///< Streams make one per 64 dispatches
  std::uint64_t buffer_views = 0;        ///< texel-buffer bindings of recorded dispatches
  std::uint64_t pipelines = 0;           ///< Kernels, built once per Device and cached

  bool operator==(const DeviceObjectCounts&) const = default;
};
/// "memory 3, command pools 2, ..." for test messages.
std::string to_string(const DeviceObjectCounts& counts);

/// The kinds of DeviceObjectCounts that runtime/vulkan counts as it makes them.
enum class DeviceObject { CommandPool, CommandBuffer, DescriptorPool, BufferView, Pipeline };

/// One logical device: a compute queue, a dedicated transfer queue where the
/// hardware has one, memory allocation and a per-device pipeline cache. Several
/// Devices may be made on the same physical device (that is how the multi-tower
/// tests run on a machine with one GPU, or none). Neither copyable nor movable:
/// Buffers, Kernels and Streams refer to it, and it must outlive them.
///
///   vkt::Instance instance;
///   vkt::Device device(instance, 0);
///   vkt::Buffer x(device, 1024 * sizeof(float));
class Device {
 public:
  Device(Instance& instance, std::uint32_t index,
         DeviceOptions options = DeviceOptions::from_environment());
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  Device(Device&&) = delete;
  Device& operator=(Device&&) = delete;

  const DeviceInfo& info() const { return info_; }
  Instance& instance() const { return *instance_; }
  const DeviceOptions& options() const { return options_; }
  /// Sets options().matmul for what is recorded from now on (to compare the
  /// kernels on one Device; steps recorded before keep theirs).
  void set_matmul_kernels(MatmulKernels kernels) { options_.matmul = kernels; }
  /// Sets options().row_kernels for what is recorded from now on.
  void set_row_kernels(RowKernels kernels) { options_.row_kernels = kernels; }
  /// True when storage buffers are mapped into host memory (unified memory and
  /// no force_staging): host transfers are memcpy, with no staging buffer.
  bool maps_storage() const { return maps_storage_; }
  bool has_transfer_queue() const { return transfer_.queue != VK_NULL_HANDLE; }
  /// The compute queues made (DeviceOptions::compute_queues, as far as offered).
  std::uint32_t compute_queues() const { return static_cast<std::uint32_t>(compute_.size()); }
  /// The largest range one storage-buffer binding may take: the device's
  /// maxStorageBufferRange, or DeviceOptions::max_storage_buffer_range if smaller.
  std::uint64_t max_storage_buffer_range() const { return max_storage_range_; }
  /// The largest range one textureBuffer binding (RGBA32F texels) may take:
  /// maxTexelBufferElements * 16 bytes.
  std::uint64_t max_texel_buffer_range() const {
    return std::uint64_t{limits_.maxTexelBufferElements} * 16;
  }

  /// The kernel for `desc`, built on first use and cached for the Device's life.
  /// Throws vkt::Error for an unknown shader or a bad specialization.
  const Kernel& kernel(const KernelDesc& desc);

  /// Blocks until every submitted ticket of this device is done.
  void wait_idle();

  /// What kernels learned by trying on this device (tile shapes, ...), kept in
  /// DeviceOptions::cache_dir across runs; shared with the process's other
  /// Devices on the same physical device.
  TuningCache& tuning() const { return *tuning_; }
  /// Writes the pipeline cache and the tuning cache to DeviceOptions::cache_dir
  /// now (only what changed), as the destructor does. Call it between steps
  /// (e.g. once the model's first step ran), not while kernels are being built.
  /// Never throws: a failure is logged.
  void save_caches();
  /// Bytes of pipeline cache data the Device started with (0: a cold start).
  std::size_t pipeline_cache_loaded_bytes() const;

  /// Memory allocations made so far, and bytes currently allocated. A training
  /// step that is only replayed must leave allocation_count() unchanged.
  std::uint64_t allocation_count() const { return allocations_.load(); }
  std::uint64_t allocated_bytes() const { return allocated_bytes_.load(); }
  /// Every kind of Vulkan object made so far (memory allocations included): a
  /// step that allocates nothing leaves all of them unchanged.
  DeviceObjectCounts object_counts() const;

  // ---- runtime/vulkan internals and interop; users do not need these ----
  VkDevice vk_device() const { return device_; }
  VkPhysicalDevice vk_physical_device() const { return physical_; }
  VkPipelineCache vk_pipeline_cache() const;
  const VkPhysicalDeviceLimits& limits() const { return limits_; }
  std::uint32_t queue_family(QueueKind kind) const { return queue(kind).family; }
  /// Submits one command buffer that waits for `waits` and returns its ticket.
  Ticket submit(QueueKind kind, VkCommandBuffer commands, std::span<const Ticket> waits);
  /// The same on compute queue `lane` (Transfer: the transfer queue, lane ignored).
  Ticket submit(QueueKind kind, std::uint32_t lane, std::span<const VkCommandBuffer> commands,
                std::span<const Ticket> waits);
  /// Submits `commands` in order in one queue submission, the first waiting for
  /// `waits`; each signals its own value, consecutive on the queue's timeline, so
  /// command buffer k is done at ticket(last).value - (size - 1 - k). Returns the
  /// last one's ticket.
  Ticket submit(QueueKind kind, std::span<const VkCommandBuffer> commands,
                std::span<const Ticket> waits);
  /// Blocks until `ticket` is done. A ticket at or before one this Device has
  /// already waited for returns at once, without asking the device.
  void wait(const Ticket& ticket) const;
  /// Blocks until every ticket (all of this Device) is done: one wait however
  /// many queues they are on.
  void wait_all(std::span<const Ticket> tickets) const;
  /// The last ticket submitted on each of the device's queues (one, or two
  /// with a dedicated transfer queue): wait_all() on them waits for everything
  /// submitted so far.
  std::vector<Ticket> submitted() const;
  /// Host waits on this device so far: every wait() or wait_all() that had to
  /// ask the device (a ticket past every one waited for before), finished or
  /// not; a count that depends only on the calls made, never on timing, so a
  /// training step's host stalls are counted where they all happen.
  std::uint64_t host_waits() const { return host_waits_.load(std::memory_order_relaxed); }
  bool done(const Ticket& ticket) const;
  /// True once a submit or a wait found the device lost (or the injected
  /// fault fired): every later submit throws vkt::DeviceLost.
  bool lost() const { return lost_.load(std::memory_order_acquire); }
  /// Queue submissions so far (each submit() call is one, however many
  /// command buffers it takes): where DeviceOptions::lose_device_at_submit
  /// counts.
  std::uint64_t submit_count() const { return submits_.load(std::memory_order_relaxed); }

  struct Allocation {
    VkDeviceMemory memory = VK_NULL_HANDLE;
    void* mapped = nullptr;
    std::uint64_t bytes = 0;
  };
  /// Allocates memory for `requirements`; `host_visible` asks for mapped,
  /// coherent memory. Throws vkt::Error before allocating when it cannot fit.
  Allocation allocate(const VkMemoryRequirements& requirements, bool host_visible,
                      const std::string& what);
  void free(Allocation& allocation);
  /// The alignment (of address and size) host memory needs to be imported
  /// (VkPhysicalDeviceExternalMemoryHostPropertiesEXT); 0 when the device
  /// does not import host memory (not offered, or DeviceOptions::import_host_memory off).
  std::size_t host_import_alignment() const { return host_import_alignment_; }
  /// Imports `bytes` of host memory at `pointer` (both aligned to
  /// host_import_alignment()) for a buffer of `requirements`; the memory must
  /// outlive the allocation. Its `mapped` is `pointer`.
  Allocation import_host(void* pointer, std::size_t bytes, const VkMemoryRequirements& requirements,
                         const std::string& what);
  /// Counts an object of `kind` that runtime/vulkan made on this device.
  void count_created(DeviceObject kind);
  /// Host transfers of unmapped buffers (Buffer::upload/download): made on
  /// first use, reused by every later transfer, destroyed before the device.
  HostTransfer& host_transfer();
  /// The threads that build this device's pipelines (Kernel).
  PipelineBuilder& pipeline_builder() { return *pipeline_builder_; }

 private:
  struct Queue {
    VkQueue queue = VK_NULL_HANDLE;
    std::uint32_t family = UINT32_MAX;
    VkSemaphore timeline = VK_NULL_HANDLE;
    std::uint64_t last_value = 0;
    std::unique_ptr<std::mutex> mutex = std::make_unique<std::mutex>();
    // The highest value a host wait has seen reached.
    std::unique_ptr<std::atomic<std::uint64_t>> waited =
        std::make_unique<std::atomic<std::uint64_t>>(0);
  };
  std::vector<Queue*> all_queues();
  const Queue& queue(QueueKind kind, std::uint32_t lane = 0) const;
  Queue& queue(QueueKind kind, std::uint32_t lane = 0);
  void release();
  /// Marks the device lost and throws vkt::DeviceLost naming it and `call`.
  [[noreturn]] void report_lost(std::string_view call) const;
  /// VKT_CHECK, with VK_ERROR_DEVICE_LOST reported as the loss of this device.
  void check_alive(VkResult result, std::string_view call) const;

  Instance* instance_;
  DeviceInfo info_;
  DeviceOptions options_;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkPhysicalDeviceMemoryProperties memory_{};
  VkPhysicalDeviceLimits limits_{};
  VkDevice device_ = VK_NULL_HANDLE;
  std::vector<Queue> compute_;  // at least one once made
  Queue transfer_;
  std::unique_ptr<PipelineCache> pipeline_cache_;
  std::shared_ptr<TuningCache> tuning_;
  bool maps_storage_ = false;
  std::uint64_t max_storage_range_ = 0;
  PFN_vkWaitSemaphores wait_semaphores_ = nullptr;
  PFN_vkGetSemaphoreCounterValue semaphore_value_ = nullptr;
  PFN_vkGetMemoryHostPointerPropertiesEXT host_pointer_properties_ = nullptr;
  std::size_t host_import_alignment_ = 0;

  std::unique_ptr<PipelineBuilder> pipeline_builder_;
  std::mutex kernels_mutex_;
  std::map<std::string, std::unique_ptr<Kernel>> kernels_;
  mutable std::atomic<std::uint64_t> host_waits_{0};
  mutable std::atomic<bool> lost_{false};
  std::atomic<std::uint64_t> submits_{0};
  std::atomic<std::uint64_t> allocations_{0};
  std::atomic<std::uint64_t> allocated_bytes_{0};
  std::atomic<std::uint64_t> created_[5] = {};  // by DeviceObject
  std::mutex host_transfer_mutex_;
  std::unique_ptr<HostTransfer> host_transfer_;
};

}  // namespace vkt
