#pragma once
// Sums the towers' gradients on the consolidation device, bucket by bucket.

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "../runtime/graph/shape.h"
#include "../runtime/vulkan/buffer.h"
#include "../runtime/vulkan/cross_device_copy.h"
#include "../runtime/vulkan/stream.h"
#include "../runtime/vulkan/ticket.h"

namespace vkt {

/// Moves every tower's gradients to the consolidation device and sums them there
/// in tower order, so the sum is the same bit for bit in every run and however
/// the gradients are bucketed. Gradients come in buckets (PyTorch DDP's reducer):
/// each tower hands over a bucket as soon as its backward pass has written it
/// (arrive(), from the tower's own host thread), and the bucket's sum is
/// submitted as soon as every tower's copy of it is there, while the towers'
/// backward passes go on. Built once, run every step: the staging buffers,
/// copies and recorded sums are reused. A tower on the consolidation device's
/// own Device hands its gradients over with a device copy, never through the host.
/// With a half `exchange` type (ReplicateOptions::exchange_dtype) each tower
/// first packs its bucket to f16 or bf16 on its own device (nearest-even), so
/// half the bytes travel, and the sum widens them exactly and adds in f32.
///
///   vkt::GradientReducer reduce(tower_arenas, master_device);
///   vkt::Ticket summed = reduce.run(backward_tickets);
///   // reduce.sum() holds g_0 + g_1 + ... on master_device
class GradientReducer {
 public:
  /// All ranges must have the same size (every tower runs the same model). The
  /// sum goes to a buffer of its own on `consolidation` (sum()). One bucket.
  GradientReducer(std::vector<BufferRange> tower_gradients, Device& consolidation,
                  DType exchange = DType::F32);
  /// The same, summing straight into `destination` (e.g. the master's gradient
  /// arena), whose size must be the towers' rounded up to 16 bytes.
  GradientReducer(std::vector<BufferRange> tower_gradients, BufferRange destination);

  /// A piece of a tower's gradients, where it goes in the destination, and the
  /// bucket it travels in.
  struct Segment {
    BufferRange source;
    std::size_t offset = 0;  ///< byte offset in the destination (a multiple of 16)
    int bucket = 0;          ///< 0 .. buckets - 1; in destination order
  };
  /// The general form: each tower contributes the same segments (same sizes,
  /// offsets and buckets), gathered and summed into `destination` (whose size is
  /// a multiple of 16); gaps between segments are left undefined. A bucket's sum
  /// binds at most Device::max_storage_buffer_range() (or `max_binding_bytes`
  /// where smaller and not 0): bigger buckets are summed in several dispatches.
  GradientReducer(const std::vector<std::vector<Segment>>& towers, BufferRange destination,
                  std::size_t max_binding_bytes = 0, DType exchange = DType::F32);

  /// Gathers and sums everything; `ready[i]` is tower i's ticket for the work
  /// that wrote its gradients (empty tickets are fine). The returned ticket, on
  /// the consolidation device, completes when sum() holds the sum.
  Ticket run(std::span<const Ticket> ready);

  /// Tower `tower`'s bucket `bucket` is written once `ready` (of the tower's
  /// Device) completes: copies it towards the consolidation device and, if it
  /// was the last tower to hand this bucket over, submits the bucket's sum.
  /// Safe to call from every tower's thread at once; each tower calls it once
  /// per bucket per step, in any order. A bucket past buckets() holds none of
  /// this reducer's segments: nothing to do.
  void arrive(std::size_t tower, int bucket, const Ticket& ready);
  /// Bucket `bucket`'s stretch of the destination, from its first summed byte
  /// to its last (gaps between its gradients included); empty for a bucket
  /// with none of this reducer's segments.
  BufferRange bucket_range(int bucket) const;
  /// `summed(bucket, ticket)` is called each time a bucket's sum is submitted,
  /// from the thread whose arrival completed it, with the ticket (of the
  /// consolidation device) after which the destination holds it. Set it before
  /// the first step.
  void on_summed(std::function<void(int, const Ticket&)> summed) { on_summed_ = std::move(summed); }
  /// Once every tower has handed over every bucket: the ticket after which
  /// sum() is complete (every bucket's sum is on one queue). Starts a new step.
  Ticket finish();

  /// Accumulation (gradient accumulation's later micro-batches): from now on
  /// each bucket's sum adds to the destination's value, dest = dest + g_0 +
  /// g_1 + ..., instead of overwriting it. Call between steps (before any
  /// tower hands a bucket over), from the thread that drives them.
  void set_accumulate(bool accumulate);
  bool accumulates() const { return accumulate_; }

  /// After a step that failed part-way: waits for the copies already started and
  /// forgets every arrival, so the next step starts clean.
  void abandon();

  /// The sum (the destination range where one was given).
  BufferRange sum() const { return destination_; }
  std::size_t towers() const { return copies_.size(); }
  int buckets() const { return static_cast<int>(sums_.size()); }
  std::size_t bytes() const { return bytes_; }
  /// Times the copies blocked a host thread so far (every tower's together).
  std::uint64_t host_waits() const;

 private:
  struct Copy {
    int bucket;
    std::unique_ptr<CrossDeviceCopy> copy;
  };

  void build(const std::vector<std::vector<Segment>>& towers, std::size_t max_binding_bytes);
  static std::vector<std::vector<Segment>> whole(const std::vector<BufferRange>& ranges);

  std::size_t bytes_;
  DType exchange_ = DType::F32;
  Buffer gathered_;  // per summing window: every tower's slice, one after another
  Buffer sum_;       // when no destination was given
  BufferRange destination_;
  std::vector<std::vector<Copy>> copies_;  // per tower, in bucket order
  // A half exchange: per tower, its packed gradients (on its Device), and per
  // tower and bucket the packing, which each copy of the bucket waits for.
  std::vector<Buffer> packed_;
  std::vector<std::vector<Stream>> packs_;
  std::vector<Stream> sums_;       // per bucket (empty stream: nothing to sum)
  std::vector<Stream> sums_into_;  // per bucket, adding to the destination
  bool accumulate_ = false;
  std::vector<std::pair<std::size_t, std::size_t>> bucket_spans_;  // per bucket, in the destination
  std::function<void(int, const Ticket&)> on_summed_;

  std::mutex mutex_;
  std::vector<std::size_t> arrived_;           // per bucket, towers so far this step
  std::vector<std::vector<Ticket>> arrivals_;  // per bucket, the copies' tickets
  Ticket last_sum_;
};

}  // namespace vkt
