#pragma once
// Copies between buffers of two Devices through host memory.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "buffer.h"
#include "staged_range.h"
#include "stream.h"
#include "ticket.h"

namespace vkt {

/// Copies a range of a buffer on one Device into same-sized ranges on other
/// Devices (or the same one): source -> source staging -> each destination's
/// staging -> destination. Built once, run every step: the staging buffers and
/// the recorded copy commands are reused. The source is read once however many
/// destinations there are (a broadcast: the master's new weights to every
/// tower). A mapped side skips its staging buffer and copy command, so between
/// two lavapipe devices a run is one memcpy; a destination on the source's own
/// Device is a device copy that never touches the host. Where no side is mapped
/// and every Device imports host memory (DeviceOptions::import_host_memory),
/// the source's Device copies into host memory that every destination's Device
/// imports and copies out of: no memcpy (two such allocations, used in turn, so
/// a run never waits for the last run's copies out).
///
///   vkt::CrossDeviceCopy to_master(tower_grads, master_grads);
///   to_master.run({backward_ticket});   // every step
///
///   vkt::CrossDeviceCopy weights(master_weights, {tower0_weights, tower1_weights});
///   std::span<const vkt::Ticket> uploaded = weights.start({update_ticket});
///   tower1.run(uploaded.subspan(1, 1));  // the next step waits on the device
class CrossDeviceCopy {
 public:
  /// Throws vkt::Error when the ranges differ in size or lie outside their buffers.
  CrossDeviceCopy(BufferRange src, BufferRange dst);
  CrossDeviceCopy(BufferRange src, std::vector<BufferRange> dsts);

  /// Starts the copy and returns once the host's part is done (waiting for the
  /// source where it passes through host memory): per destination, the ticket
  /// (of that destination's Device) after which it holds the data, empty where
  /// the host wrote it directly. `src_ready` are tickets of the source's Device
  /// for the work that writes the source. `dst_after`, empty or one per
  /// destination (of its Device, may be empty): work that must be done before
  /// the destination is overwritten (its own writes of the old values); the
  /// copy waits for it on the device, the host only where it writes the
  /// destination itself. The tickets stay valid until the next start().
  std::span<const Ticket> start(std::span<const Ticket> src_ready = {},
                                std::span<const Ticket> dst_after = {});
  /// start() and wait: returns when every destination holds the data.
  void run(std::span<const Ticket> src_ready = {});

  /// How many device copy commands a run records (0 when every side is mapped).
  int device_copies() const;
  /// Times start() has blocked the calling thread so far (for the benches).
  std::uint64_t host_waits() const { return host_waits_; }
  /// True when the bytes pass through host memory every side imports (no memcpy).
  bool imports_host_memory() const { return !imported_.empty(); }

 private:
  struct Remote {
    BufferRange dst;
    StagedRange up;  // the host's bytes into dst (not through imported memory)
  };
  BufferRange src_;
  std::vector<BufferRange> dsts_;
  std::vector<std::size_t> local_;   // destinations on the source's Device
  std::vector<std::size_t> remote_;  // the others, index into remotes_ by position
  std::vector<Remote> remotes_;
  std::optional<Stream> local_copy_;  // src -> every local destination, on the device
  StagedRange down_;                  // src to the host (not through imported memory)
  std::vector<Ticket> tickets_;       // per destination, of the last start()
  std::uint64_t host_waits_ = 0;

  struct FreeBytes {
    void operator()(std::byte* p) const;
  };
  /// Host memory every side imports: the source's copy in, each remote
  /// destination's copy out.
  struct Imported {
    std::unique_ptr<std::byte, FreeBytes> memory;
    Buffer on_source;
    std::optional<Stream> in;
    std::vector<Buffer> on_remote;   // per remote
    std::vector<Stream> out;         // per remote
    std::vector<Ticket> copied_out;  // per remote, of the last start() using it
  };
  /// Two host allocations of the source's size rounded up to `alignment`,
  /// each imported by every side, with their copies in and out.
  void build_imported(std::size_t alignment);
  std::span<const Ticket> start_imported(std::span<const Ticket> src_ready,
                                         std::span<const Ticket> dst_after);
  std::vector<Imported> imported_;  // two, used in turn; empty: not imported
  std::size_t next_imported_ = 0;
};

/// One-off CrossDeviceCopy(src, dst).run(src_ready).
void copy_across(BufferRange src, BufferRange dst, std::span<const Ticket> src_ready = {});

}  // namespace vkt
