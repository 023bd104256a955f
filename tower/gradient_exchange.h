#pragma once
// The towers' gradients to the update: summed over towers and processes, bucket by bucket.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "../runtime/graph/tensor.h"
#include "../runtime/vulkan/buffer.h"
#include "../runtime/vulkan/cross_device_copy.h"
#include "../runtime/vulkan/ticket.h"
#include "gradient_reducer.h"

namespace vkt {

class OverlappedExchange;
class ProcessExchange;
class ProcessGroup;
class Towers;

/// Gradient k of a tower (in call order) travels in bucket `of_gradient[k]`:
/// the gradients in the order the backward pass writes them, cut every
/// `bucket_bytes` (PyTorch DDP's buckets).
struct GradientBuckets {
  std::vector<int> of_gradient;
  int count = 1;
};
/// The buckets of a tower's `gradients`, planned from their tensor order
/// (the order the executor places and the backward pass writes them).
GradientBuckets plan_gradient_buckets(const std::vector<Tensor>& gradients,
                                      std::size_t bucket_bytes);

/// Where the update wants one set of summed dense gradients (the master's
/// gradient arena, Mirrored's sum, a RoundRobin share's arena).
struct GradientDestination {
  BufferRange sum;  ///< no buffer: this destination takes no dense gradient
  std::vector<std::vector<GradientReducer::Segment>> segments;  ///< per tower
};
/// A tower's rows of a sparse gradient (values or indices) in one micro-batch,
/// copied as they are to their slot of the master's concatenation.
struct SparseRows {
  std::size_t tower = 0;
  int micro_batch = 0;
  BufferRange from, to;
};

/// Every tower's gradients from its backward pass to the update's
/// destinations: each bucket summed on a destination's device in tower order
/// as soon as every tower has written it (GradientReducer), sparse rows copied
/// to their slots, and across processes each bucket's sum summed over the
/// processes in rank order (overlapped with the backward passes where the
/// step has no collectives of its own) and the sparse rows gathered. Every
/// sum has one order, so the bits do not depend on timing or on bucketing.
///
///   vkt::GradientExchange exchange(destinations, sparse_rows, buckets, towers, k);
///   exchange.begin(first, last, "step 7");
///   towers.run(shards, {}, step, &losses, &exchange);  // hands buckets over
///   vkt::GradientExchange::Summed summed = exchange.finish_micro_batch(m, done);
///   if (last) { exchange.complete(summed, "step 7"); update.apply(summed); }
class GradientExchange {
 public:
  /// `exchange`: the type the dense gradients travel in (GradientReducer).
  GradientExchange(const std::vector<GradientDestination>& destinations,
                   const std::vector<SparseRows>& sparse, int buckets, std::size_t towers,
                   int accumulate_steps, DType exchange = DType::F32);
  ~GradientExchange();
  GradientExchange(const GradientExchange&) = delete;
  GradientExchange& operator=(const GradientExchange&) = delete;

  /// Across processes: the exchange between them, whose dense sums travel
  /// in the constructor's `exchange` type. `gathered`: the sparse rows'
  /// ranges (processes equal blocks each, this rank's written here).
  /// `may_overlap`: the step makes no collectives of its own, so each
  /// bucket's exchange may start while the backward passes go on (one
  /// destination).
  void join(ProcessGroup& processes, std::vector<BufferRange> gathered, std::size_t chunk_bytes,
            bool may_overlap);
  /// True when buckets are summed over the processes while the towers run.
  bool overlaps_processes() const { return overlap_ != nullptr; }

  int buckets() const { return buckets_; }
  /// A micro-batch starts: its sums overwrite the destinations (`first` of a
  /// step) or add to them; on the step's `last`, the overlapped exchange
  /// over the processes begins (`what` names the step in errors).
  void begin(bool first, bool last, const std::string& what);
  /// Tower `tower`'s bucket `bucket` is written once `ready` completes: to
  /// every destination. From the tower's thread.
  void hand_over(std::size_t tower, int bucket, const Ticket& ready);
  /// After a step that failed part-way: waits for what is under way and
  /// forgets every arrival, so the next step starts clean.
  void abandon();

  /// Where a micro-batch's gradients stand once every tower handed them over.
  struct Summed {
    std::vector<Ticket> sums;    ///< per destination: its sums (empty: nothing to wait for)
    std::vector<Ticket> sparse;  ///< the sparse rows' arrival at the master
  };
  /// Every bucket handed over: the sums' tickets and the sparse rows of
  /// micro-batch `micro` started (after `towers_done`, per tower).
  Summed finish_micro_batch(std::size_t micro, std::span<const Ticket> towers_done);
  /// A micro-batch before the k-th: its sums and sparse rows must be in place
  /// before the towers write their gradients again. Where every tower is on
  /// a ticket's Device their next runs wait for it there; else the host
  /// waits. True when the host waited.
  bool wait_micro_batch(const Summed& summed, Towers& towers);
  /// The k-th micro-batch: across processes, the sums summed over them and the
  /// sparse rows gathered; each of `summed.sums` becomes the ticket after
  /// which its destination holds the job's sums. Nothing alone.
  void complete(Summed& summed, const std::string& what);
  /// The last complete()'s time across processes, the host's wait included.
  double processes_ms() const { return processes_ms_; }

  /// Times the sparse copies blocked the step's thread, and the bucket copies
  /// the towers' threads.
  std::uint64_t step_thread_waits() const;
  std::uint64_t tower_thread_waits() const;

 private:
  int buckets_;
  DType exchange_;
  // Per destination; null where it takes no dense gradient.
  std::vector<std::unique_ptr<GradientReducer>> reducers_;
  // Per tower, per micro-batch: its sparse rows into the master's slots.
  std::vector<std::vector<std::vector<std::unique_ptr<CrossDeviceCopy>>>> sparse_in_;
  double processes_ms_ = 0;
  // Last, so destroyed first: its buffers lie on the devices above.
  std::unique_ptr<ProcessExchange> processes_;  // null: one process
  // Its buckets exchanged as they are summed; null: after the step.
  std::unique_ptr<OverlappedExchange> overlap_;
};

}  // namespace vkt
