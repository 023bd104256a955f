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
#include "../runtime/vulkan/device.h"
#include "replicate.h"
#include "step_losses.h"
#include "step_pacing.h"
#include "tower_device_pool.h"

namespace vkt {

struct OptimizerCalls;
class GradientExchange;
class ProcessGroup;
class Towers;
class WeightUpdate;

/// One replicated model's run, in three parts: the towers (Towers: every
/// tower's Device, graph and program, run concurrently, each on a persistent
/// host thread), the exchange (GradientExchange: each tower's gradients
/// handed over bucket by bucket while its backward pass goes on, summed over
/// towers and processes) and the update (WeightUpdate: the optimizers on the
/// consolidation device(s), the new weights back to every tower). This class
/// drives a step through them and holds what spans them: the losses, the
/// pacing, checkpoints, evaluation's sums. One tower: its own Executor does
/// everything, no copies. The root Instance only names the devices; it need
/// not outlive the TowerRun.
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
  /// Under loss scaling, the scale and the skipped steps after the newest
  /// step take_losses() returned: copied after each step's update and read
  /// with the losses, so a log of them stalls nothing. None before the
  /// first, after a restore, or where they cannot be copied in one piece
  /// (then read the "loss_scale/..." variables).
  const std::optional<LossScaleState>& taken_loss_scale() const;
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
  int buckets() const;
  /// True when, across processes, each bucket's sum over the processes starts
  /// as soon as this process's sum of it is submitted, while the backward
  /// passes go on (not with RoundRobin or a synchronized batch norm, whose own
  /// collectives run during the step).
  bool overlaps_processes() const;
  /// Commands (dispatches, copies, fills) tower `i`'s step program submits
  /// each step; with one tower that is the whole step, the optimizers' updates
  /// included. How far fusion has driven a step's dispatches down.
  std::size_t tower_command_count(int i) const;

  int towers() const;
  /// A tower whose Device was lost (Device::lost()).
  struct LostTower {
    int position = 0;          ///< in the device list as given (Distribution::lost_towers)
    int tower = 0;             ///< among this run's towers
    std::uint32_t device = 0;  ///< the Instance's device index
    std::string name;          ///< the device's name
  };
  /// The towers whose Device was lost: after a vkt::DeviceLost, the towers a
  /// run rebuilt to go on leaves out.
  std::vector<LostTower> lost_towers() const;
  /// ShardSplit::Measured, training: after each completed step, nothing
  /// until measure_steps steps past the run's first are timed, then (once)
  /// each tower's weight, its examples per millisecond on its device over
  /// them: the weights to rebuild the run with (Distribution::
  /// measured_shard_weights). Waits for each measured step's end.
  std::optional<std::vector<double>> measured_shard_weights();
  /// True when training scales the loss (ReplicateOptions::loss_scaling).
  bool scales_loss() const;
  /// "fp32", or e.g. "fp16 with dynamic loss scaling from 65536", for the log.
  std::string precision_description() const;
  Graph& tower_graph(int i);
  const EstimatorSpec& tower_spec(int i) const;

 private:
  /// Training with an exchange: the towers' gradients, their buckets and
  /// programs, the update and the exchange.
  void build_training(const Instance& root, const std::vector<std::uint32_t>& devices);
  /// vkt::Error unless every tower made tower 0's optimizer calls, and sparse
  /// gradients only where the variable mode takes them.
  void check_calls() const;
  void build_eval_predict();
  void build_one_tower();
  /// Training: where every tower's run leaves its loss (losses_).
  void build_losses();
  /// True when training hands the towers' gradients over to be combined on a
  /// consolidation device (several towers, several processes or accumulation);
  /// false: one tower trains alone, its optimizers in its own program, or the
  /// run evaluates or predicts.
  bool exchanges() const { return exchange_ != nullptr; }
  /// This process's rank in the job (0 without a ProcessGroup).
  int rank() const;
  /// A tower's loss scale for `mode`, its shard `rows` of this process's
  /// `batch` on `towers` towers: rows/(batch x processes) for Mean and
  /// SumByNonzeroWeights (1/(towers x processes) for equal shards), 1 for
  /// Sum; training with accumulation also 1/k. Formed in double, rounded once.
  float loss_scale(std::int64_t rows, std::int64_t batch, int towers, Mode mode) const;
  DeviceOptions device_options() const;
  /// `listed` (the towers' devices) less the positions of the lost towers
  /// (Distribution::lost_towers), with their tower_device_options; sets
  /// positions_.
  std::vector<std::uint32_t> remaining_devices(const std::vector<std::uint32_t>& listed);
  /// The shard weights the towers take (ShardSplit; empty: equal shards);
  /// sets measured_weights_ and whether this run measures.
  std::vector<double> shard_weights(int towers, Mode mode);
  /// Eval: vkt::Error unless every tower returned the same metrics, computed alike.
  void check_eval_metrics() const;
  /// Feeds each tower its shard and runs it (Towers::run) with the random
  /// draws of the step and micro-batch; in training, every bucket of the
  /// gradients to the exchange as it is written. A tower that fails drops the
  /// step's exchange.
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
  /// The end of a micro-batch that exchanges (`micro`, the step's `last`):
  /// its sums; on the k-th, the exchange across processes, the update and the
  /// new weights to every tower.
  void exchange_and_apply(std::span<const Ticket> done, std::size_t micro, bool last,
                          std::chrono::steady_clock::time_point towers_done);
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
  /// Every distinct Device of the run (the towers', the update's own): fixed
  /// once built, kept in devices_ for the step.
  std::vector<const Device*> all_devices() const;
  Graph& variables_graph() const;
  std::vector<Graph*> share_graphs() const;

  ReplicateOptions options_;
  // The towers' Devices (TowerDevices): the root context's pool (an
  // Estimator's, shared by its models) or the run's own. First, so that it
  // outlives every member that holds work or memory on them (a constructor
  // that throws destroys the members alone, in reverse order).
  TowerDevicePool own_pool_;
  TowerDevicePool* pool_ = nullptr;
  Distribution distribution_{};
  Mode mode_ = Mode::Train;
  int accumulate_ = 1;  // micro-batches per global step (Train)
  int micro_ = 0;       // micro-batches of the current step done
  bool step_completed_ = false;
  std::unique_ptr<OptimizerCalls> calls_;
  std::unique_ptr<Towers> towers_;
  StepPacing pacing_;
  // Training with an exchange (several towers or processes, or accumulation);
  // the exchange after the update, so destroyed before it: it sums into the
  // update's buffers.
  std::unique_ptr<WeightUpdate> update_;
  std::unique_ptr<GradientExchange> exchange_;
  // Training: every run's and completed step's losses; the one host wait a
  // step. Last, so destroyed first: its copies read the towers' losses and
  // the update's loss-scale state, and wait for their work as they go.
  std::unique_ptr<StepLosses> losses_;
  std::vector<const Device*> devices_;
  std::vector<int> positions_;  // each tower's position in the device list as given
  // ShardSplit::Measured: the weights in use, saved in every checkpoint; or,
  // while measuring, each tower's device milliseconds so far, over steps
  // counted from the run's first.
  std::vector<double> measured_weights_;
  bool measuring_ = false;
  std::uint32_t steps_run_ = 0, measured_steps_ = 0;
  std::vector<double> measured_ms_;
  std::uint64_t step_thread_waits_ = 0;
  mutable StepTimes times_;
  mutable bool slowest_unread_ = false;  // times_.slowest_tower is not read back yet
  // Eval: per metric, per accumulator, the sums so far; and the loss.
  std::map<std::string, std::vector<std::vector<double>>> sums_;
  double loss_sum_ = 0;      // sum of scaled tower loss * the tower's real examples
  double examples_sum_ = 0;  // real examples / towers, summed
};

}  // namespace vkt
