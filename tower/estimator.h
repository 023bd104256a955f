#pragma once
// The Estimator: training, evaluation and prediction loops over a model
// function and input functions, with checkpoints in a model directory.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../runtime/vulkan/instance.h"
#include "input_fn.h"
#include "model_fn.h"
#include "warm_start.h"

namespace vkt {

class DeviceLost;
class ProcessGroup;
class TowerDevicePool;
class TowerRun;
class TrainingLog;

/// What train() does when a tower's device is lost (vkt::DeviceLost: the
/// driver's VK_ERROR_DEVICE_LOST, a submit or a wait that fails). The step
/// under way is given up, nothing of it applied to the saved state.
enum class DeviceLossAction {
  /// Stop with a vkt::DeviceLost naming the device, the tower and the last
  /// checkpoint, which is intact: training again resumes from it.
  Stop,
  /// Restore the last checkpoint (or the initial variables, before the first)
  /// and go on without the lost towers, with the same global batch and data
  /// order, logging what was done; as a run started from that checkpoint on
  /// the remaining towers would. One process only (across processes: Stop).
  Continue,
};

/// tf.estimator.RunConfig.
struct RunConfig {
  /// Checkpoints, metrics.csv and loss.png go here; training resumes from the
  /// newest checkpoint found here. Empty: a new temporary directory, removed
  /// with the Estimator.
  std::string model_dir{};
  /// The graph seed: initial variables, dropout masks.
  std::uint64_t random_seed = 0;
  /// A checkpoint every N global steps (and always at the end of train); 0: only at the end.
  std::uint64_t save_checkpoints_steps = 100;
  int keep_checkpoint_max = 5;
  /// The logging hook's period in steps (step, loss, examples/s, steps/s); 0: no logging hook.
  std::uint64_t log_step_count_steps = 100;
  /// The training loss goes to metrics.csv (and the loss curve) every N steps
  /// and at the end of train(); 0: only at the end.
  std::uint64_t save_summary_steps = 10;
  /// Progress on the terminal: a bar when stderr is a terminal, plain lines otherwise.
  bool progress = true;
  /// Redraw model_dir/loss.png (gnuplot, when installed) after each train() and
  /// evaluate(): ~65 ms a call, worth turning off for many short calls.
  bool plot_loss = true;
  /// Gradient accumulation (PyTorch DDP's no_sync): each global step sums the
  /// gradients of this many micro-batches (each a batch of the input) and
  /// applies them once, as one batch of k x the input's batch would. The
  /// global step, TrainSpec's steps, hooks, logging and checkpoints count
  /// global steps. 1: none; vkt::Error below 1.
  int accumulate_steps = 1;
  /// Variables from another run's checkpoint when training starts with no
  /// checkpoint in model_dir (see WarmStartSettings); a run that finds its own
  /// checkpoint resumes from it instead.
  std::optional<WarmStartSettings> warm_start_from{};
  /// Several processes (one per host, each with its own towers) on Open MPI:
  /// unset = join the MPI world when mpirun started this process; true =
  /// always (vkt::Error when vktower was built without MPI); false = never.
  /// Each rank reads the whole input and trains on its slice of every global
  /// batch; only rank 0 logs, writes checkpoints, metrics.csv and loss.png,
  /// and reads checkpoints (model_dir need not be shared: see DISTRIBUTED.md).
  std::optional<bool> mpi{};
  /// How long a rank waits for the others in any exchange before it stops
  /// with an error naming the step and the rank that did not answer.
  double process_timeout_s = 60;
  /// Ctrl-C (SIGINT) or SIGTERM during train(): the step under way finishes,
  /// a checkpoint is saved (every rank stops at the same step), metrics.csv
  /// and the log are written, one line says where training stopped and how to
  /// resume, and the process ends by that signal (a shell sees exit status 130
  /// or 143); a second Ctrl-C ends it at once. During evaluate() and predict()
  /// the process ends at the next batch. A temporary model directory is
  /// removed first. false: signals are left as the program set them.
  bool stop_on_signals = true;
  /// A tower's device lost during train(): stop (the default) or go on with
  /// the others from the last checkpoint (DeviceLossAction).
  DeviceLossAction on_device_loss = DeviceLossAction::Stop;
  /// Where the towers' Devices come from, so that several Estimators of one
  /// program (a sweep over learning rates, a model trained then another
  /// fine-tuned) run on the same Devices and build each kernel once: not
  /// owned, must outlive the Estimators. Null: the Estimator makes its own,
  /// dropped with it.
  TowerDevicePool* device_pool = nullptr;
};

/// How long train() runs: `steps` more steps, or until the global step
/// reaches `max_steps` (at most one of them); with neither, until the input ends.
struct TrainSpec {
  std::optional<std::uint64_t> steps{};
  std::optional<std::uint64_t> max_steps{};
  /// Called besides the model's own hooks and the built-in ones (logging, NaN loss).
  std::vector<std::shared_ptr<TrainingHook>> hooks{};
};

/// A model trained, evaluated and used for prediction (tf.estimator.Estimator).
/// Each mode's replicated model is built on first use from the first batch's
/// shapes. Evaluation and prediction read the newest checkpoint of model_dir,
/// which train() writes when it ends, so they see the trained weights (and a
/// new process can evaluate a model trained by another).
///
///   vkt::Estimator estimator(vkt::replicate_model_fn(my_model), {.model_dir = "model"});
///   estimator.train(train_input, {.max_steps = 2000});
///   std::map<std::string, double> result = estimator.evaluate(test_input);
///   fmt::print("accuracy {}\n", result.at("accuracy"));
class Estimator {
 public:
  Estimator(ModelFn model_fn, RunConfig config = {}, Params params = {});
  ~Estimator();
  Estimator(const Estimator&) = delete;
  Estimator& operator=(const Estimator&) = delete;

  /// Trains; resumes from model_dir's newest checkpoint first if there is one.
  /// Every batch must be full (use drop_remainder). Returns the global step.
  /// A NaN loss stops training with a vkt::Error naming the step.
  std::uint64_t train(const InputFn& input_fn, const TrainSpec& spec = {});
  /// Every example of the input counted once (the short last batch is padded,
  /// and the padding masked out of every metric and the loss); `steps` limits
  /// the batches. Returns "loss", every eval metric and "global_step".
  std::map<std::string, double> evaluate(const InputFn& input_fn,
                                         std::optional<std::uint64_t> steps = std::nullopt);
  /// Every prediction, one row per input example in input order (the short
  /// last batch included): each entry is [examples, ...]. Across processes,
  /// on rank 0 (every rank predicts its slice); the other ranks get none.
  HostBatch predict(const InputFn& input_fn);

  /// tf.estimator.train_and_evaluate: trains to `spec.max_steps` (or
  /// `spec.steps` more), stopping every `eval_every_steps` to evaluate on
  /// `eval_input` (its rows go to metrics.csv and the loss curve), and once at
  /// the end. Returns the last evaluation.
  std::map<std::string, double> train_and_evaluate(const InputFn& train_input,
                                                   const TrainSpec& spec, const InputFn& eval_input,
                                                   std::uint64_t eval_every_steps);

  /// The training step reached: the trained model's, else the newest
  /// checkpoint's, else 0.
  std::uint64_t global_step() const;
  /// A variable's value (optimizer slots included, e.g. "w/Adam/m") in the
  /// newest checkpoint (tf.estimator's get_variable_value). Across processes
  /// every rank holds rank 0's variables after train(), and the other ranks
  /// answer from those (their model_dir need not hold the checkpoints).
  /// vkt::Error when there is no checkpoint or no such variable (the message
  /// lists them).
  HostTensor variable_value(const std::string& name) const;
  /// The newest checkpoint of model_dir, if any.
  std::optional<std::string> latest_checkpoint() const;
  const RunConfig& config() const { return config_; }
  /// True when the last train() started from a checkpoint.
  bool resumed() const { return resumed_; }
  /// True when the last train() took its variables from RunConfig::warm_start_from.
  bool warm_started() const { return warm_started_; }
  Instance& instance() { return instance_; }
  /// The job's processes (null: this process alone) and this one's rank.
  ProcessGroup* processes() const { return processes_; }
  int rank() const;

 private:
  struct Built;
  Built& built(Mode mode, const Batch& first, std::int64_t batch_size);
  /// Training's start: restores `latest` (rank 0's newest checkpoint) or
  /// warm-starts (RunConfig::warm_start_from), once per built model.
  void start_from(Built& b, const std::optional<std::string>& latest);
  /// train() from the newest checkpoint (or the built model) to `last`:
  /// the global step reached, or none when the model is to be rebuilt (its
  /// shards measured) and trained on from the checkpoint just saved.
  std::optional<std::uint64_t> train_to(const InputFn& input_fn, const TrainSpec& spec,
                                        std::optional<std::uint64_t> last);
  /// Shards measured after `step`: logged, kept for the next build, and the
  /// built models dropped.
  void reshard(const std::vector<double>& weights, std::uint64_t step);
  /// After a device was lost mid-step (`lost`): throws vkt::DeviceLost under
  /// DeviceLossAction::Stop (and across processes), else logs, drops the
  /// built models and the lost Devices so that train_to() rebuilds on the
  /// remaining towers from the last checkpoint.
  void handle_device_loss(const DeviceLost& lost);
  /// The model's hooks, the call's, the NaN check and the logging hook.
  std::vector<std::shared_ptr<TrainingHook>> training_hooks(const Built& b, const TrainSpec& spec,
                                                            std::int64_t step_examples);
  /// True when every hook (on every rank) takes late losses.
  bool takes_late_losses(const std::vector<std::shared_ptr<TrainingHook>>& hooks) const;
  /// A loss-scaled run's scale and skipped steps, to the log and metrics.csv.
  void log_loss_scale(TowerRun& run);
  /// The newest checkpoint as rank 0 sees it (every rank gets the same answer).
  std::optional<std::string> chief_latest() const;
  /// Where training starts: the trained model's step, else rank 0's newest
  /// checkpoint's, else 0 (the same on every rank).
  std::uint64_t chief_global_step(const std::optional<std::string>& latest) const;
  /// This rank's rows of a global batch; with `real` rows in it, how many of
  /// this rank's rows are real.
  HostBatch my_rows(const HostBatch& batch) const;
  std::int64_t my_real_rows(std::int64_t real, std::int64_t batch_size) const;
  bool chief() const { return rank() == 0; }
  /// The signal that asked to stop, agreed by every rank after `step` (0: none).
  int stop_requested(std::uint64_t step) const;
  /// A stop asked for by `signal`: removes a temporary model_dir, ends the process.
  [[noreturn]] void end_by_signal(int signal);
  /// train() stopped by `signal` after `step` (checkpoint `saved`): one line
  /// saying where and how to resume, then end_by_signal.
  [[noreturn]] void end_stopped_training(const std::string& saved, std::uint64_t step, int signal);
  /// The info line that starts training: towers, devices, processes, batch.
  void log_layout(TowerRun& run, std::int64_t step_examples) const;

  ModelFn model_fn_;
  RunConfig config_;
  ProcessGroup* processes_ = nullptr;
  Params params_;
  Instance instance_;
  // The Devices every model of this Estimator (training, evaluation,
  // prediction) runs on, unless RunConfig::device_pool gives them; before
  // built_, which must go first.
  std::unique_ptr<TowerDevicePool> devices_;
  TowerDevicePool& device_pool();
  std::map<Mode, std::unique_ptr<Built>> built_;
  std::unique_ptr<TrainingLog> log_;
  bool resumed_ = false;
  bool warm_started_ = false;
  bool own_model_dir_ = false;  // a temporary directory, removed with the Estimator
  // Positions in the replicated model's device list of towers lost so far
  // (Distribution::lost_towers): every model built later leaves them out.
  std::vector<int> lost_towers_;
  // Shard weights measured by this run or the newest checkpoint's
  // (Distribution::measured_shard_weights).
  std::vector<double> measured_shards_;
};

}  // namespace vkt
