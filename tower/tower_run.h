#pragma once
// The towers of one replicated model, trained together.

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "../runtime/graph/executor.h"
#include "../runtime/vulkan/cross_device_copy.h"
#include "../runtime/vulkan/device.h"
#include "gradient_reducer.h"
#include "replica_sum.h"
#include "replicate.h"
#include "step_losses.h"
#include "step_pacing.h"
#include "tower_device_pool.h"
#include "tower_threads.h"

namespace vkt {

struct OptimizerCalls;
class OverlappedExchange;
class ProcessExchange;
class ProcessGroup;

/// Owns every tower's Instance, Device, Graph and Executor, the consolidation
/// device's master graph (variables, slots, the optimizers' updates) and the
/// copies between them. Towers run concurrently, each on a persistent host
/// thread of its own; each hands its gradients over bucket by bucket while its
/// backward pass goes on (ReplicateOptions::bucket_bytes). One tower: its own
/// Executor does everything, no copies. The root Instance only names the
/// devices; it need not outlive the TowerRun.
class TowerRun {
 public:
  TowerRun(ModelContext& root, const ModelFn& model_fn, const ReplicateOptions& options, Mode mode,
           const Params& params);
  ~TowerRun();

  /// One training step on a global batch: shard, run every tower, reduce the
  /// gradients, apply, copy the weights back. With accumulation
  /// (Distribution::accumulate_steps = k > 1) each call is one micro-batch:
  /// its gradients are added to the step's on the consolidation device, and
  /// the k-th call applies them (step_completed()). Given the next batch too, every
  /// tower uploads its shard of it while this step computes (double-buffered
  /// feeds); train_step_fed() then trains on it.
  ///
  ///   run.train_step(first.features, first.labels, &second.features, &second.labels);
  ///   run.train_step_fed(&third.features, &third.labels);  // trains on `second`
  ///   run.train_step_fed();                                // trains on `third`
  void train_step(const HostBatch& features, const HostBatch& labels,
                  const HostBatch* next_features = nullptr, const HostBatch* next_labels = nullptr);
  /// A training step on the batch the previous step was given as its next one
  /// (vkt::Error when it was given none); the same results as train_step on it.
  void train_step_fed(const HostBatch* next_features = nullptr,
                      const HostBatch* next_labels = nullptr);
  /// Evaluation (Mode::Eval): adds one global batch to the loss and to every
  /// metric's accumulators, summed over the towers. Only the first
  /// `real_examples` rows (default: all) are examples; the rest is padding:
  /// ModelContext::example_weights() is 0 there, per-example metrics leave those
  /// rows out, and a tower with no real rows adds nothing.
  void evaluate_step(const HostBatch& features, const HostBatch& labels,
                     std::optional<std::int64_t> real_examples = std::nullopt);
  /// "loss" and every metric, read from the accumulated sums. The loss is the
  /// summed scaled tower losses, averaged over batches with each tower's loss
  /// weighted by its real examples (so with full batches, the plain mean over
  /// batches; with a Mean reduction and example_weights() as the loss weights,
  /// the mean over every real example).
  std::map<std::string, double> metrics() const;
  /// Starts a new evaluation: the sums back to zero.
  void reset_metrics();
  /// Prediction (Mode::Predict): every prediction of the global batch, and
  /// every export output as "<export name>/<output name>", the towers' rows
  /// concatenated in tower order (so in input order).
  HostBatch predict_step(const HostBatch& features);
  /// The loss of the last step: the sum, in tower order, of the scaled tower
  /// losses; with accumulation, summed over the step's micro-batches so far
  /// (after the k-th, what one batch of k micro-batches reports).
  float loss();
  /// A finished step's loss, as loss() gave it right after the step.
  using StepLoss = vkt::StepLoss;
  /// The losses of the completed steps not taken yet, oldest first, all but
  /// the newest `leave`: read without waiting for the steps after them, so
  /// a loop that takes each step's loss two steps late never stalls the
  /// device (the Estimator's, when every hook takes late losses). Waits only
  /// for the steps it returns. The run keeps the last few steps' losses
  /// (kKeptSteps); older ones not taken are dropped. Across processes it is
  /// collective, like loss(): every rank calls it at the same steps.
  ///
  ///   run.train_step(batch.features, batch.labels);
  ///   for (const auto& [step, loss] : run.take_losses(2)) log(step, loss);
  std::vector<StepLoss> take_losses(std::size_t leave = 0);
  static constexpr std::size_t kKeptSteps = StepLosses::kKept;
  /// True when the last train_step completed a global step (always, without
  /// accumulation; on the k-th micro-batch with it).
  bool step_completed() const { return step_completed_; }
  /// The micro-batches of the current global step trained so far (0 at a step's start).
  int micro_batch() const { return micro_; }
  /// Drops the micro-batches of an unfinished step: the next train_step starts
  /// a new one (an input that ended mid-step).
  void discard_micro_batches() { micro_ = 0; }
  /// The processes of the job (1 without a ProcessGroup).
  int processes() const;
  /// Micro-batches per global step (Distribution::accumulate_steps).
  int accumulate_steps() const { return accumulate_; }
  /// A variable's or optimizer slot's value (the master copy with several
  /// towers; with RoundRobin, its owner device's).
  std::vector<float> variable(const std::string& name);
  /// variable() with its shape; vkt::Error naming the variables there are.
  HostTensor variable_value(const std::string& name);
  /// Saves every variable, slot and the global step as a safetensors checkpoint
  /// (the masters; with Mirrored, tower 0's replica, which every tower equals;
  /// with RoundRobin, every device's share in one file).
  void save(const std::string& path);
  /// Loads a checkpoint made by save() for the same model and sends the values
  /// to every tower. vkt::Error (with nothing loaded) when it does not match.
  /// An Eval or Predict model takes the variables it has and ignores the
  /// rest (optimizer slots). Across processes it is collective: rank 0 reads
  /// `path` and sends it to every rank (the others never open it, so a model_dir
  /// need not be shared).
  void restore(const std::string& path);
  std::uint64_t global_step() const;
  /// Overwrites variable `name` wherever the model holds it (the master, every
  /// tower's replica, a RoundRobin share): a warm start before the first step.
  /// vkt::Error, with nothing changed, for an unknown name or a wrong size.
  void assign(const std::string& name, std::span<const float> values);

  /// Where the last step's time went, in milliseconds of host wall clock.
  struct StepTimes {
    double towers = 0;     ///< feeding the shards, forward and backward on every tower
    double reduce = 0;     ///< gathering and summing the gradients
    double apply = 0;      ///< the optimizers on the consolidation device
    double copy_back = 0;  ///< the new weights back to every tower
    /// Of `apply`: the sums (and sparse rows) exchanged with the other
    /// processes, the host's wait for this process's sums included (0 alone).
    double processes = 0;
    /// The slowest tower's forward and backward pass as its device timed it
    /// (0 where the device has no timestamp queries): step - this is the
    /// exchange time the overlap left exposed.
    double slowest_tower = 0;
    double step = 0;  ///< the whole train_step
  };
  /// The last step's times. The towers' device times are read back when first
  /// asked after a step (a read is a trip to the device, which a step that no
  /// one times should not pay), so ask before the next step starts.
  const StepTimes& last_step_times() const;
  /// Times a host thread blocked on the device so far: the thread that calls
  /// train_step, and the towers' threads while handing gradients over.
  struct HostWaits {
    std::uint64_t step_thread = 0;
    std::uint64_t tower_threads = 0;
    /// Every wait on any of the run's Devices, from any thread (Device::
    /// host_waits()): the two above and what they leave out (the end of each
    /// tower's step, the loss and metrics read back, evaluation).
    std::uint64_t devices = 0;
  };
  HostWaits host_waits() const;
  /// Gradient buckets per step (1 with one tower).
  int buckets() const { return buckets_; }
  /// True when, across processes, each bucket's sum over the processes starts
  /// as soon as this process's sum of it is submitted, while the backward
  /// passes go on (not with RoundRobin or a synchronized batch norm, whose own
  /// collectives run during the step).
  bool overlaps_processes() const { return overlap_ != nullptr; }
  /// Commands (dispatches, copies, fills) tower `i`'s step program submits
  /// each step; with one tower that is the whole step, the optimizers' updates
  /// included. How far fusion has driven a step's dispatches down.
  std::size_t tower_command_count(int i) const {
    const Tower& t = towers_.at(static_cast<std::size_t>(i));
    return t.executor ? t.executor->dispatch_count() : 0;
  }

  int towers() const { return static_cast<int>(towers_.size()); }
  Graph& tower_graph(int i) { return *towers_.at(i).graph; }
  const EstimatorSpec& tower_spec(int i) const { return towers_.at(i).spec; }

 private:
  struct Tower {
    Device* device = nullptr;  // in the device pool
    std::uint32_t lane = 0;    // its compute queue on `device`
    std::unique_ptr<Graph> graph;
    EstimatorSpec spec;
    Tensor scaled_loss;
    std::vector<Tensor> gradients;     // every recorded call's, in call order
    std::vector<Tensor> accumulators;  // Eval: every metric's, in metric order
    bool takes_example_weights = false;
    std::unique_ptr<Executor> executor;
    // The new weights' upload, which the tower's next run waits for on the
    // device. Also the graph's last run, so host access to the variables waits.
    Ticket weights_arrived;
    // Work of its own Device that its next run must follow on the device: the
    // sums and sparse copies that read its gradients (accumulation's micro-batches).
    std::vector<Ticket> run_after;
    // SharedLocalParameterServer: its rows of every sparse gradient into the
    // master's (values and indices, per sparse gradient in call order), per
    // micro-batch: micro-batch m's copies at [m * per, (m + 1) * per).
    std::vector<std::unique_ptr<CrossDeviceCopy>> sparse_in;
    // Mirrored: the tower's own update program.
    std::unique_ptr<Executor> updates;
  };
  /// Builds every tower's graph and model; then the programs for `mode`.
  void build_towers(ModelContext& root, const ModelFn& model_fn,
                    const std::vector<std::uint32_t>& devices, const Params& params, float scale);
  void build_eval_predict(float scale);
  void build_one_tower();
  /// Training: where every tower's run leaves its loss (losses_).
  void build_losses();
  void build_training(const Instance& root, const std::vector<std::uint32_t>& devices, float scale);
  /// Gradient k (of every tower's `gradients`, in call order) travels in bucket
  /// gradient_bucket_[k]: tower 0's gradients in the order its backward pass
  /// writes them, cut every bucket_bytes.
  void plan_buckets();
  std::vector<std::vector<Tensor>> ready_groups(const Tower& t) const;
  /// The Device for consolidation work on physical device `index`: `tower`'s
  /// (or the first tower's on `index`) when the placement allows, else a new
  /// one kept in `instance` and `device`.
  Device& consolidation_device(const Instance& root, std::uint32_t index,
                               std::unique_ptr<Instance>& instance, std::unique_ptr<Device>& device,
                               const Tower* tower = nullptr);
  bool on_tower_device() const;
  /// True when the towers' gradients are handed over and combined on a
  /// consolidation device (several towers, several processes or accumulation);
  /// false: one tower trains alone, its optimizers in its own program.
  bool exchanges() const { return exchanges_; }
  /// This process's rank in the job (0 without a ProcessGroup).
  int rank() const;
  /// The towers' loss scale for `mode`: 1/(towers x processes) for Mean and
  /// SumByNonzeroWeights, 1 for Sum; training with accumulation also 1/k.
  /// Formed in double, rounded once.
  float loss_scale(int towers, Mode mode) const;
  /// Every reducer: the next micro-batch's sums add to the destination's
  /// value (accumulate) or overwrite it (a step's first micro-batch).
  void set_accumulating(bool accumulate);
  /// A micro-batch before the k-th: its sums (`summed`, per destination) and
  /// sparse rows must be in place before the towers write their gradients
  /// again; on the towers' own Device that is a wait on the device.
  void wait_micro_batch(std::span<const Ticket> summed);
  /// The k-th micro-batch: the step's gradients are complete on the
  /// consolidation device(s) and the update begins. `summed` holds, per
  /// destination (SharedLocalParameterServer: the master's gradient arena;
  /// Mirrored: mirrored_sum_; RoundRobin: each share's gradient arena, in share
  /// order), the ticket after which it holds this process's sums over its
  /// towers and micro-batches (empty: nothing to wait for); the sparse rows of
  /// this process's k n slots arrive at sparse_arrived_. The cross-process
  /// exchange goes here, replacing each ticket with the one the update waits
  /// for (of the destination's Device).
  void gradients_complete(std::vector<Ticket>& summed);
  /// SharedLocalParameterServer and Mirrored, the k-th micro-batch: the
  /// update after gradients_complete(), the new weights to every tower.
  void apply_step(const Ticket& summed, std::chrono::steady_clock::time_point reduced);
  DeviceOptions device_options() const;
  /// Eval: vkt::Error unless every tower returned the same metrics, computed alike.
  void check_eval_metrics() const;
  void build_master(const Instance& root, const std::vector<std::uint32_t>& devices);
  /// Mirrored: every tower gets the updates of every recorded call on its own
  /// variables and slots; made before the towers' first executors.
  void build_mirrored_updates(std::vector<std::vector<Tensor>>& updates);
  void build_mirrored(const Instance& root, const std::vector<std::uint32_t>& devices,
                      std::vector<std::vector<Tensor>>& updates);
  /// RoundRobin: variable k's master, reduction and updates on tower k mod N's
  /// device (tower/round_robin.cpp).
  void build_round_robin(const Instance& root, const std::vector<std::uint32_t>& devices);
  /// RoundRobin's end of a micro-batch: every share's sums; on the k-th, the
  /// shares' updates and the new weights to every tower.
  void step_round_robin(bool last_micro_batch);
  /// Feeds each tower its shard and runs it, each on its own thread; in
  /// training, hands every bucket of its gradients to the reducers as it is
  /// written. Returns when every tower is done.
  struct NextBatch {  // no member initializers: it is a default argument below
    const HostBatch* features;
    const HostBatch* labels;
  };
  std::vector<Ticket> run_towers(const HostBatch& features, const HostBatch& labels,
                                 std::optional<std::int64_t> real_examples = std::nullopt,
                                 const NextBatch& next = NextBatch{nullptr, nullptr},
                                 bool fed = false);
  void train(const HostBatch& features, const HostBatch& labels, const HostBatch* next_features,
             const HostBatch* next_labels, bool fed);
  /// The global batch cut into the towers' shards, checked (check_batch).
  std::vector<HostBatch> shards_of(const HostBatch& features, const HostBatch& labels,
                                   std::optional<std::int64_t> real_examples) const;
  void feed(int tower, const HostBatch& shard);

  /// vkt::Error, before any tower runs, for an entry of a tower's shard that the
  /// model has no input for, does not use, or takes in another type or shape.
  void check_batch(const HostBatch& shard) const;
  /// Tower i's bucket b is written once `ready` completes: to every reducer.
  void hand_over(std::size_t tower, int bucket, const Ticket& ready);
  /// Tower i's new weights arrive at `ticket` (of its Device; empty: already
  /// there). Every upload to a tower is on its Device's transfer queue, so the
  /// latest ticket covers the earlier ones.
  void weights_arrive(std::size_t tower, const Ticket& ticket);
  /// Across processes (tower/tower_processes.cpp): the model check, the
  /// exchange of the step's gradients, rank 0's variables sent to every rank
  /// (its checkpoint at `path`, or its variables as they are).
  std::vector<std::string> describe(const ModelContext& root) const;
  void join_processes(const ModelContext& root);
  void restore_from_rank0(const std::optional<std::string>& path);
  void restore_local(const std::string& path);
  /// The step's loss on this process alone (loss() adds the other processes').
  float local_loss();
  /// Tower i's Device: a new one, or an earlier tower's on the same physical
  /// device when the towers share (ReplicateOptions::tower_devices).
  Device& tower_device(const Instance& root, const std::vector<std::uint32_t>& devices, int i);
  /// Every distinct Device of the run (the towers', the consolidation's, the
  /// shares'): fixed once built, kept in devices_ for the step.
  std::vector<const Device*> all_devices() const;
  std::vector<const Device*> devices_;
  Graph& variables_graph() const;
  std::vector<Graph*> share_graphs() const;

  ReplicateOptions options_;
  // The towers' Devices (TowerDevices): the root context's pool (an
  // Estimator's, shared by its models) or the run's own. First, so that it
  // outlives every member that holds work or memory on them (a constructor
  // that throws destroys the members alone, in reverse order).
  TowerDevicePool own_pool_;
  TowerDevicePool* pool_ = nullptr;
  std::unique_ptr<Instance> master_instance_;
  std::unique_ptr<Device> master_device_;  // null when the master is on tower 0's Device
  Distribution distribution_{};
  int accumulate_ = 1;  // micro-batches per global step (Train)
  bool exchanges_ = false;
  int micro_ = 0;  // micro-batches of the current step done
  bool step_completed_ = false;
  // Training: every run's and completed step's losses; the one host wait a step.
  std::unique_ptr<StepLosses> losses_;
  StepPacing pacing_;
  std::vector<Tower> towers_;
  std::unique_ptr<OptimizerCalls> calls_;
  Device* consolidation_ = nullptr;
  std::unique_ptr<Graph> master_;
  std::unique_ptr<Executor> master_executor_;
  std::unique_ptr<GradientReducer> reducer_;
  // The new weights (SharedLocalParameterServer) or the summed gradients
  // (Mirrored), read once and sent to every tower.
  std::unique_ptr<CrossDeviceCopy> broadcast_;
  Buffer mirrored_sum_;
  std::vector<Ticket> sparse_arrived_;  // per tower: its sparse rows on the master
  // Per sparse gradient of the master, its values' and its indices' ranges
  // (processes x k x n slots of a tower's rows; rank r's block is the
  // contiguous slots [r k n, (r + 1) k n)).
  std::vector<BufferRange> master_sparse_;
  std::unique_ptr<TowerThreads> threads_;
  std::vector<int> gradient_bucket_;
  int buckets_ = 1;
  std::uint64_t step_thread_waits_ = 0;
  bool prefed_ = false;  // the next step's batch is in the towers' feed buffers
  // RoundRobin: one share of the variables per device.
  struct Share {
    std::unique_ptr<Instance> instance;
    std::unique_ptr<Device> device;  // null when it is on its tower's Device
    std::unique_ptr<Graph> graph;
    std::unique_ptr<Executor> executor;  // null when its variables take no update
    std::unique_ptr<GradientReducer> reducer;
    std::vector<std::unique_ptr<CrossDeviceCopy>> weights_back;  // per variable, to every tower
  };
  std::vector<Share> shares_;
  // The towers' meeting point at each cross_replica_sum (several towers).
  std::unique_ptr<ReplicaSum> replica_sum_;
  // Tower 0's state variables (moving averages) into their masters, each step.
  std::vector<std::unique_ptr<CrossDeviceCopy>> state_in_;
  /// The copies of state_in_, made once the masters exist.
  void build_state_copies();
  /// Starts them after tower 0's last run; appends, per copy, the ticket of its
  /// master's device to `arrived`.
  void copy_state(std::vector<Ticket>& arrived);
  /// True for a variable that a state update of tower 0 writes.
  bool is_state_variable(const std::string& name) const;
  mutable StepTimes times_;
  mutable bool slowest_unread_ = false;  // times_.slowest_tower is not read back yet
  Mode mode_ = Mode::Train;
  // Eval: per metric, per accumulator, the sums so far; and the loss.
  std::map<std::string, std::vector<std::vector<double>>> sums_;
  double loss_sum_ = 0;      // sum of scaled tower loss * the tower's real examples
  double examples_sum_ = 0;  // real examples / towers, summed
  std::int64_t tower_batch_ = 0;
  // Last, so destroyed first: its buffers lie on the devices above.
  std::unique_ptr<ProcessExchange> exchange_;  // across processes; null: one process
  // Its buckets exchanged as they are summed (SharedLocalParameterServer and
  // Mirrored without synchronized batch norm); null: after the step.
  std::unique_ptr<OverlappedExchange> overlap_;
};

}  // namespace vkt
