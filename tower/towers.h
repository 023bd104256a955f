#pragma once
// The towers of a replicated model: their graphs and programs, run side by side.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "../runtime/graph/executor.h"
#include "../runtime/vulkan/device.h"
#include "model_fn.h"
#include "tower_threads.h"

namespace vkt {

class GradientExchange;
class ProcessGroup;
class ReplicaSum;
class StepLosses;
struct OptimizerCalls;

/// Every tower's Device, graph, model and step program, run concurrently (one
/// persistent host thread per tower), each on its shard of the global batch.
/// TowerRun builds it first; the exchange and the update read the towers'
/// buffers and hand work back through run_after() and weights_arrive().
///
///   vkt::Towers towers(root, model_fn, n, mode, params, shares, &calls, rank, processes,
///                      precision, device_of);
///   towers.build_training_programs(bucket_of, buckets, processes);
///   std::vector<vkt::Ticket> done = towers.run(towers.shards_of(f, l), {}, step, &losses, &ex);
class Towers {
 public:
  struct Tower {
    Device* device = nullptr;  // not owned (TowerRun's device pool)
    std::uint32_t lane = 0;    // its compute queue on `device`
    std::unique_ptr<Graph> graph;
    EstimatorSpec spec;
    Tensor scaled_loss;
    std::int64_t rows = 0;             // its shard's rows of this process's batch
    std::int64_t first = 0;            // where its shard starts in this process's batch
    float scale = 1.0f;                // its loss scale (TowerRun::loss_scale)
    std::vector<Tensor> gradients;     // Train: every recorded call's, in call order
    std::vector<Tensor> accumulators;  // Eval: every metric's, in metric order
    bool takes_example_weights = false;
    std::unique_ptr<Executor> executor;
    // The new weights' upload, which the tower's next run waits for on the
    // device. Also the graph's last run, so host access to the variables waits.
    Ticket weights_arrived;
    // Work of its own Device that its next run must follow on the device: the
    // sums and sparse copies that read its gradients (accumulation's micro-batches).
    std::vector<Ticket> run_after;
  };

  /// Builds tower i's graph on `device_of(i)` for i < `towers` and calls the
  /// model function on it. Every check on the inputs comes before the first
  /// device is asked for. `calls`: where the towers' TowerOptimizer calls are
  /// recorded when their gradients are exchanged (null: one tower trains
  /// alone, or not training). `shares`: how the batch is cut and each
  /// shard's loss scale; `rank` this process's (the shards' first rows, so
  /// dropout, depend on it). `precision` is every tower graph's
  /// (GraphOptions::precision); a half one needs 16-bit storage on every
  /// tower's device.
  struct Shares {
    /// One weight per tower (ReplicateOptions::shard_weights); empty: equal shards.
    std::vector<double> weights;
    /// A shard's loss scale from its rows and the process's batch.
    std::function<float(std::int64_t rows, std::int64_t batch)> scale_of;
  };
  Towers(ModelContext& root, const ModelFn& model_fn, int towers, Mode mode, const Params& params,
         const Shares& shares, OptimizerCalls* calls, int rank, int processes, Precision precision,
         const std::function<Device&(int)>& device_of);
  ~Towers();
  Towers(const Towers&) = delete;
  Towers& operator=(const Towers&) = delete;

  /// Training with an exchange: each tower's gradients (Tower::gradients, in
  /// call order, sparse ones as values then indices) and its scaled loss.
  void collect_gradients(const OptimizerCalls& calls);
  /// Training with an exchange: each tower's step program, writing gradient k
  /// in bucket `bucket_of[k]` (the executor reports each bucket as written).
  /// Their cross_replica_sums go on across `processes` (null: one process).
  void build_training_programs(const std::vector<int>& bucket_of, int buckets,
                               ProcessGroup* processes);

  /// The global batch cut into the towers' shards and checked (check_batch).
  /// Eval adds every shard's example weights: 0 past `real_examples` rows.
  std::vector<HostBatch> shards_of(const HostBatch& features, const HostBatch& labels,
                                   std::optional<std::int64_t> real_examples) const;
  /// Feeds each tower its shard (none: the shards the previous run was given as
  /// `next`) and runs it, each on its own thread, with the random draws of
  /// `step`. After its run a tower records its loss in `losses`, feeds its
  /// `next` shard (double-buffered feeds) and hands every bucket of its
  /// gradients to `exchange` as it is written (null: none). Returns, per tower,
  /// the ticket of its run, not waited for. A tower that throws aborts the
  /// others' cross_replica_sums; the lowest tower's exception is rethrown.
  std::vector<Ticket> run(const std::vector<HostBatch>& shards, const std::vector<HostBatch>& next,
                          std::uint64_t step, StepLosses* losses, GradientExchange* exchange);
  /// True when the last run() was given the next step's shards.
  bool prefed() const { return prefed_; }

  /// Tower `i`'s new weights arrive at `ticket` (of its Device; empty: already
  /// there). Every upload to a tower is on its Device's transfer queue, so the
  /// latest ticket covers the earlier ones.
  void weights_arrive(std::size_t i, const Ticket& ticket);
  /// Every tower's next run follows `ticket` on the device (each is on its Device).
  void run_after(const Ticket& ticket);
  /// The slowest tower's last run as its device timed it (0 where untimed).
  double slowest_device_ms() const;

  std::size_t size() const { return towers_.size(); }
  Tower& operator[](std::size_t i) { return towers_.at(i); }
  const Tower& operator[](std::size_t i) const { return towers_.at(i); }
  Tower& front() { return towers_.front(); }
  const Tower& front() const { return towers_.front(); }
  std::vector<Tower>::iterator begin() { return towers_.begin(); }
  std::vector<Tower>::iterator end() { return towers_.end(); }
  std::vector<Tower>::const_iterator begin() const { return towers_.begin(); }
  std::vector<Tower>::const_iterator end() const { return towers_.end(); }
  /// Rows of this process's batch, all towers' shards together.
  std::int64_t batch() const { return batch_; }
  /// True when the towers' shards differ in size (ReplicateOptions::shard_weights).
  bool unequal() const;
  /// Stops the towers' threads (before what they call into goes away).
  void stop_threads() { threads_.reset(); }

 private:
  /// vkt::Error, before any tower runs, for an entry of a tower's shard that the
  /// model has no input for, does not use, or takes in another type or shape.
  void check_batch(const HostBatch& shard) const;
  void feed(std::size_t tower, const HostBatch& shard);
  std::vector<std::vector<Tensor>> ready_groups(const Tower& t, const std::vector<int>& bucket_of,
                                                int buckets) const;

  Mode mode_;
  std::vector<Tower> towers_;
  std::unique_ptr<TowerThreads> threads_;  // several towers; one runs on the caller's
  // Training with an exchange: the towers' meeting point at each cross_replica_sum.
  std::unique_ptr<ReplicaSum> replica_sum_;
  std::int64_t batch_ = 0;
  bool prefed_ = false;  // the next step's batch is in the towers' feed buffers
};

}  // namespace vkt
