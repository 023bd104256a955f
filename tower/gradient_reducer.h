#pragma once
// Sums the towers' gradient arenas on the consolidation device.

#include <memory>
#include <span>
#include <vector>

#include "../runtime/vulkan/buffer.h"
#include "../runtime/vulkan/cross_device_copy.h"
#include "../runtime/vulkan/stream.h"
#include "../runtime/vulkan/ticket.h"

namespace vkt {

/// Moves every tower's gradient arena (one buffer per tower, Horovod's tensor
/// fusion) to the consolidation device with staged copies, one copy per arena,
/// and sums them there in tower order with one dispatch, so the sum is the same
/// bit for bit in every run. Built once, run every step: the staging buffers,
/// copies and the recorded sum are reused.
///
///   vkt::GradientReducer reduce(tower_arenas, master_device);
///   vkt::Ticket summed = reduce.run(backward_tickets);
///   // reduce.sum() holds g_0 + g_1 + ... on master_device
class GradientReducer {
 public:
  /// All ranges must have the same size (every tower runs the same model). The
  /// sum goes to a buffer of its own on `consolidation` (sum()).
  GradientReducer(std::vector<BufferRange> tower_gradients, Device& consolidation);
  /// The same, summing straight into `destination` (e.g. the master's gradient
  /// arena), whose size must be the towers' rounded up to 16 bytes.
  GradientReducer(std::vector<BufferRange> tower_gradients, BufferRange destination);

  /// A piece of a tower's gradients and where it goes in the destination.
  struct Segment {
    BufferRange source;
    std::size_t offset = 0;  ///< byte offset in the destination (a multiple of 16)
  };
  /// The general form: each tower contributes the same segments (same sizes and
  /// offsets), gathered into one layout and summed into `destination` (whose
  /// size is a multiple of 16); gaps between segments are left undefined. The
  /// round-robin variable mode reduces each device's share of the variables so.
  GradientReducer(const std::vector<std::vector<Segment>>& towers, BufferRange destination);

  /// Gathers and sums; `ready[i]` is tower i's ticket for the work that wrote
  /// its gradients (empty tickets are fine). The returned ticket, on the
  /// consolidation device, completes when sum() holds the sum.
  Ticket run(std::span<const Ticket> ready);

  /// The sum (the destination range where one was given).
  BufferRange sum() const { return destination_; }
  std::size_t towers() const { return copies_.size(); }
  std::size_t bytes() const { return bytes_; }

 private:
  void build(const std::vector<std::vector<Segment>>& towers);
  static std::vector<std::vector<Segment>> whole(const std::vector<BufferRange>& ranges);

  std::size_t bytes_;
  std::size_t stride_;  // bytes between two towers' slices in gathered_
  Buffer gathered_;
  Buffer sum_;  // when no destination was given
  BufferRange destination_;
  std::vector<std::vector<std::unique_ptr<CrossDeviceCopy>>> copies_;  // per tower, per segment
  Stream add_;
};

}  // namespace vkt
