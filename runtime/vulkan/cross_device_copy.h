#pragma once
// Copies between buffers of two Devices through host memory.

#include <optional>
#include <span>

#include "buffer.h"
#include "stream.h"
#include "ticket.h"

namespace vkt {

/// Copies a range of a buffer on one Device into a same-sized range on another
/// (or the same) Device: source -> source staging -> destination staging ->
/// destination. Built once, run every step: the staging buffers and the
/// recorded copy commands are reused. A mapped side skips its staging buffer and
/// copy command, so between two lavapipe devices a run is one memcpy.
///
///   vkt::CrossDeviceCopy to_master(tower_grads, master_grads);
///   to_master.run({backward_ticket});   // every step
class CrossDeviceCopy {
 public:
  /// Throws vkt::Error when the ranges differ in size or lie outside their buffers.
  CrossDeviceCopy(BufferRange src, BufferRange dst);

  /// Copies now and returns when the destination holds the data. `src_ready`
  /// are tickets (of the source's Device) for the work that writes the source.
  void run(std::span<const Ticket> src_ready = {});

  /// How many device copy commands a run records (0 when both sides are mapped).
  int device_copies() const { return (download_ ? 1 : 0) + (upload_ ? 1 : 0); }

 private:
  BufferRange src_;
  BufferRange dst_;
  Buffer src_staging_;
  Buffer dst_staging_;
  std::optional<Stream> download_;  // src -> src_staging_
  std::optional<Stream> upload_;    // dst_staging_ -> dst
};

/// One-off CrossDeviceCopy(src, dst).run(src_ready).
void copy_across(BufferRange src, BufferRange dst, std::span<const Ticket> src_ready = {});

}  // namespace vkt
