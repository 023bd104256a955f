#include "estimator.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>

#include "../runtime/io/checkpoint.h"
#include "../runtime/io/checkpoint_manager.h"
#include "../runtime/mpi/process_group.h"
#include "../runtime/vulkan/detail/log.h"
#include "../runtime/vulkan/error.h"
#include "hooks.h"
#include "process_batches.h"
#include "replicate.h"
#include "tower_device_pool.h"
#include "tower_run.h"
#include "training_log.h"

namespace vkt {

namespace fs = std::filesystem;

/// A mode's model, built for one batch shape.
struct Estimator::Built {
  std::int64_t batch_size = 0;
  std::map<std::string, InputSpec> features, labels;
  std::shared_ptr<TowerRun> run;
  std::vector<std::shared_ptr<TrainingHook>> hooks;
  std::optional<std::string> restored;  // the checkpoint the variables hold, if any
  bool warm_started = false;            // RunConfig::warm_start_from was applied
};

namespace {

std::string temporary_model_dir() {
  std::random_device random;
  fs::path dir;
  do {  // a new name: the directory is removed at the end, so it must be ours
    dir = fs::temp_directory_path() / fmt::format("vktower-{:08x}", random());
  } while (fs::exists(dir));
  detail::log().info("no model_dir given: using temporary directory {} (removed at the end)",
                     dir.string());
  return dir.string();
}

/// Refuses a model_dir that takes no file before the first step runs: the
/// first checkpoint would fail only after training (a read-only directory).
void check_writable(const std::string& dir) {
  const std::string probe = (fs::path(dir) / fmt::format(".vktower-probe-{}", ::getpid())).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw Error(fmt::format(
        "RunConfig.model_dir '{}' is not writable ({}): checkpoints cannot be saved there; give "
        "a directory you can write to",
        dir, std::strerror(errno)));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

/// start + steps, refused past the largest global step (it would wrap).
std::uint64_t last_step(std::uint64_t start, std::uint64_t steps) {
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  if (steps > kMax - start) {
    throw Error(fmt::format(
        "train: steps {} from global step {} would pass the largest global step {}; give 1 to "
        "{} steps",
        steps, start, kMax, kMax - start));
  }
  return start + steps;
}

std::map<std::string, InputSpec> specs_of(const HostBatch& batch, std::int64_t batch_size,
                                          const char* what) {
  std::map<std::string, InputSpec> specs;
  for (const auto& [name, t] : batch) {
    if (t.rows() == 0) {
      throw Error(fmt::format("{} '{}' is a scalar; every input needs the examples as dimension 0",
                              what, name));
    }
    std::vector<std::int64_t> dims = t.shape.dims();
    dims[0] = batch_size;
    specs[name] = {Shape(dims), t.dtype};
  }
  return specs;
}

/// The rows of a batch (the same in every entry; vkt::Error otherwise, or when
/// there are more than a full batch).
std::int64_t rows_of(const HostBatch& features, const HostBatch& labels, std::int64_t batch_size) {
  std::int64_t rows = -1;
  for (const HostBatch* part : {&features, &labels}) {
    for (const auto& [name, t] : *part) {
      if (rows >= 0 && t.rows() != rows) {
        throw Error(fmt::format(
            "the input gave a batch whose entries disagree on the number of examples ('{}' has "
            "{}, another {})",
            name, t.rows(), rows));
      }
      rows = t.rows();
    }
  }
  if (rows < 1 || rows > batch_size) {
    throw Error(fmt::format("the input gave a batch of {} examples; its batch_size() is {}", rows,
                            batch_size));
  }
  return rows;
}

/// A short batch filled up to `rows` in place; a full one is left as it is.
void pad(HostBatch& batch, std::int64_t rows) {
  for (auto& [name, t] : batch) {
    if (t.rows() < rows) t = t.padded_rows(rows);
  }
}

}  // namespace

Estimator::Estimator(ModelFn model_fn, RunConfig config, Params params)
    : model_fn_(std::move(model_fn)),
      config_(std::move(config)),
      params_(std::move(params)),
      instance_(InstanceOptions::from_environment()) {
  if (!model_fn_) throw Error("Estimator: the model function is empty");
  if (!is_replicated(model_fn_)) {
    throw Error(
        "Estimator: give it vkt::replicate_model_fn(model_fn) (with devices {0} for one "
        "device), which builds the model function once per tower; a plain model function "
        "has no devices to run on");
  }
  if (config_.warm_start_from) check_warm_start_settings(*config_.warm_start_from);
  if (!(config_.process_timeout_s >= 0.001 && config_.process_timeout_s <= 86400.0 * 365)) {
    throw Error(fmt::format(
        "RunConfig.process_timeout_s is {}; give the seconds a rank waits for the others "
        "(0.001 to a year; 60 is the default)",
        config_.process_timeout_s));
  }
  if (config_.accumulate_steps < 1) {
    throw Error(fmt::format(
        "RunConfig.accumulate_steps is {}; give 1 or more micro-batches per global step (1: no "
        "accumulation)",
        config_.accumulate_steps));
  }
  if (config_.keep_checkpoint_max < 1) {
    throw Error(fmt::format("RunConfig.keep_checkpoint_max is {}; keep at least 1",
                            config_.keep_checkpoint_max));
  }
  if (config_.model_dir.empty()) {
    config_.model_dir = temporary_model_dir();
    own_model_dir_ = true;
  }
  std::error_code ec;
  fs::create_directories(config_.model_dir, ec);
  if (ec) {
    throw Error(fmt::format("RunConfig.model_dir '{}' cannot be created: {}", config_.model_dir,
                            ec.message()));
  }
  if (config_.mpi.value_or(launched_by_mpirun())) {
    processes_ = &mpi_world();
    processes_->set_timeout(std::chrono::milliseconds(
        static_cast<std::int64_t>(std::llround(config_.process_timeout_s * 1000))));
  }
  // Only rank 0 shows progress and keeps metrics.csv and loss.png.
  if (chief()) {
    log_ = std::make_unique<TrainingLog>(config_.model_dir, config_.progress, config_.plot_loss);
  }
}

Estimator::~Estimator() {
  built_.clear();
  log_.reset();
  if (own_model_dir_) {
    std::error_code ec;
    fs::remove_all(config_.model_dir, ec);
  }
}

std::uint64_t Estimator::chief_global_step(const std::optional<std::string>& latest) const {
  const auto trained = built_.find(Mode::Train);
  if (trained != built_.end()) return trained->second->run->global_step();
  std::uint64_t step = chief() && latest ? checkpoint_global_step(*latest) : 0;
  if (processes_) {
    processes_->broadcast(std::as_writable_bytes(std::span<std::uint64_t>(&step, 1)), 0,
                          "rank 0's global step");
  }
  return step;
}

HostTensor Estimator::variable_value(const std::string& name) const {
  const std::optional<std::string> latest = latest_checkpoint();
  if (!latest) {
    throw Error(fmt::format("variable_value: model_dir '{}' has no checkpoint; train first",
                            config_.model_dir));
  }
  std::map<std::string, HostTensor> values = read_checkpoint(*latest);
  const auto it = values.find(name);
  if (it == values.end()) {
    std::vector<std::string> names;
    for (const auto& [n, v] : values) names.push_back(n);
    throw Error(fmt::format("variable_value: checkpoint '{}' has no variable '{}'; it has {}",
                            *latest, name, fmt::join(names, ", ")));
  }
  return std::move(it->second);
}

std::uint64_t Estimator::global_step() const {
  const auto trained = built_.find(Mode::Train);
  if (trained != built_.end()) return trained->second->run->global_step();
  const std::optional<std::string> latest = latest_checkpoint();
  return latest ? checkpoint_global_step(*latest) : 0;
}

std::optional<std::string> Estimator::latest_checkpoint() const {
  return CheckpointManager(config_.model_dir, config_.keep_checkpoint_max).latest();
}

Estimator::Built& Estimator::built(Mode mode, const Batch& first, std::int64_t global_batch) {
  const int ranks = processes_ ? processes_->size() : 1;
  if (global_batch % ranks != 0) {
    throw Error(fmt::format(
        "the input's batch of {} examples does not divide among {} processes; use a batch size "
        "that is a multiple of {} (processes) x the towers per process",
        global_batch, ranks, ranks));
  }
  const std::int64_t batch_size = global_batch / ranks;  // this rank's slice
  std::map<std::string, InputSpec> features = specs_of(first.features, batch_size, "feature");
  std::map<std::string, InputSpec> labels = mode == Mode::Predict
                                                ? std::map<std::string, InputSpec>{}
                                                : specs_of(first.labels, batch_size, "label");
  const auto found = built_.find(mode);
  Built* slot = found == built_.end() ? nullptr : found->second.get();
  const auto same = [](const std::map<std::string, InputSpec>& a,
                       const std::map<std::string, InputSpec>& b) {
    if (a.size() != b.size()) return false;
    for (const auto& [name, spec] : a) {
      const auto it = b.find(name);
      if (it == b.end() || it->second.shape != spec.shape || it->second.dtype != spec.dtype) {
        return false;
      }
    }
    return true;
  };
  if (slot && slot->batch_size == batch_size && same(slot->features, features) &&
      same(slot->labels, labels)) {
    return *slot;
  }
  if (mode == Mode::Train && slot) {
    throw Error(fmt::format(
        "train: the input's batches changed shape since the last train() call (batch size {} "
        "now, {} before); an Estimator trains one model",
        batch_size, slot->batch_size));
  }
  auto b = std::make_unique<Built>();
  b->batch_size = batch_size;
  b->features = features;
  b->labels = labels;
  ModelContext root(instance_, features, labels, GraphOptions{.seed = config_.random_seed});
  root.set_distribution({.processes = processes_, .accumulate_steps = config_.accumulate_steps});
  if (!devices_) devices_ = std::make_unique<TowerDevicePool>();
  root.set_device_pool(devices_.get());
  EstimatorSpec spec = model_fn_(root, {}, {}, mode, params_);
  if (!spec.run) throw Error("internal: a replicated model function returned no run");
  b->run = spec.run;
  b->hooks = spec.training_hooks;
  std::unique_ptr<Built>& kept = built_[mode];  // only once the model is built
  kept = std::move(b);
  return *kept;
}

std::uint64_t Estimator::train(const InputFn& input_fn, const TrainSpec& spec) {
  if (spec.steps && spec.max_steps) {
    throw Error("train: give steps or max_steps, not both");
  }
  if (spec.steps && *spec.steps == 0) throw Error("train: steps is 0; give 1 or more");
  for (std::size_t i = 0; i < spec.hooks.size(); ++i) {
    if (!spec.hooks[i]) throw Error(fmt::format("train: hook {} of TrainSpec.hooks is null", i));
  }
  const std::optional<std::string> latest = chief_latest();
  const std::uint64_t start = chief_global_step(latest);  // where the input resumes
  std::optional<std::uint64_t> last;
  if (spec.steps) last = last_step(start, *spec.steps);
  if (spec.max_steps) last = *spec.max_steps;
  if (last && *last <= start) {
    detail::log().info("the model is at global step {}, max_steps is {}: nothing to train", start,
                       *last);
    return start;
  }
  if (chief()) check_writable(config_.model_dir);
  const auto k = static_cast<std::uint64_t>(config_.accumulate_steps);
  if (start > std::numeric_limits<std::uint64_t>::max() / k) {
    throw Error(fmt::format(
        "train: global step {} x accumulate_steps {} passes the largest batch number; the "
        "input cannot resume there",
        start, k));
  }
  std::unique_ptr<Input> input =
      input_fn(InputContext{.start_step = start, .start_batch = start * k});
  std::optional<Batch> batch = input->next();
  if (!batch) throw Error("train: the input gave no batch");
  const std::int64_t batch_size = input->batch_size();
  if (batch_size > std::numeric_limits<std::int64_t>::max() / config_.accumulate_steps) {
    throw Error(fmt::format("train: batches of {} x accumulate_steps {} pass the largest count",
                            batch_size, config_.accumulate_steps));
  }
  Built& b = built(Mode::Train, *batch, batch_size);
  TowerRun& run = *b.run;
  run.discard_micro_batches();  // an earlier call's input may have ended mid-step
  resumed_ = false;
  warm_started_ = false;
  if (latest && !b.restored) {
    run.restore(*latest);
    b.restored = latest;
    resumed_ = true;
    if (chief()) {
      detail::log().info("resuming from {} at global step {}", *latest, run.global_step());
    }
  } else if (!latest && !b.restored && !b.warm_started && config_.warm_start_from) {
    warm_start(run, *config_.warm_start_from);
    b.warm_started = warm_started_ = true;
    if (chief()) {
      detail::log().info("warm-started from {}", config_.warm_start_from->ckpt_to_initialize_from);
    }
  }

  const std::int64_t step_examples = batch_size * config_.accumulate_steps;
  std::vector<std::shared_ptr<TrainingHook>> hooks = b.hooks;
  hooks.insert(hooks.end(), spec.hooks.begin(), spec.hooks.end());
  hooks.push_back(std::make_shared<NanLossHook>());
  if (config_.log_step_count_steps > 0) {
    hooks.push_back(std::make_shared<LoggingHook>(config_.log_step_count_steps, step_examples,
                                                  [this](const StepRate& r) {
                                                    if (log_) log_->rate(r);
                                                  }));
  }
  CheckpointManager checkpoints(config_.model_dir, config_.keep_checkpoint_max);
  const auto save = [&] {
    if (!chief()) {  // rank 0 writes; every rank holds the same variables
      b.restored = "rank 0's checkpoint";
      return;
    }
    const std::string path =
        checkpoints.save(run.global_step(), [&](const std::string& file) { run.save(file); });
    b.restored = path;
    detail::log().debug("saved {}", path);
  };

  // Each step's loss goes to the hooks and the log two steps late where every
  // hook takes that (the step thread then never waits for a loss), else at once.
  bool late = std::all_of(hooks.begin(), hooks.end(),
                          [](const auto& hook) { return hook->takes_late_losses(); });
  if (processes_) {  // reading the losses is collective: every rank alike
    double late_ranks = late ? 1.0 : 0.0;
    processes_->allreduce_sum(std::span<double>(&late_ranks, 1), "whether hooks take late losses");
    late = late_ranks == static_cast<double>(processes_->size());
  }
  for (const auto& hook : hooks) hook->begin();
  if (log_) log_->start(run.global_step(), last, step_examples, config_.save_summary_steps);
  std::uint64_t step = run.global_step();
  std::uint64_t saved_at = step;
  float loss = 0;
  // Hands the steps' losses over, all but the newest `leave`; true when a hook asks to stop.
  const auto report = [&](std::size_t leave) {
    bool stop = false;
    for (const auto& [at, value] : run.take_losses(leave)) {
      loss = value;
      for (const auto& hook : hooks) {
        hook->after_step(at, value);
        stop = stop || hook->should_stop();
      }
      if (log_) log_->step(at, value);
    }
    return stop;
  };
  // The batch after this one is fed to the towers while this one trains.
  std::optional<Batch> next;
  bool fed = false;
  try {
    for (std::uint64_t batches = 1; batch; ++batches) {
      const std::int64_t rows = rows_of(batch->features, batch->labels, batch_size);
      if (rows != batch_size) {
        throw Error(fmt::format(
            "train: batch {} has {} examples, the model's batch is {}; training needs full "
            "batches (dataset_input with drop_remainder = true)",
            batches, rows, batch_size));
      }
      // With accumulation each batch is one micro-batch; only a step's last
      // can end training.
      const bool ends_step = run.micro_batch() + 1 == config_.accumulate_steps;
      next = !last || !ends_step || step + 1 < *last ? input->next() : std::nullopt;
      // A short batch is not fed ahead: its own turn reports it.
      const bool ahead = next && rows_of(next->features, next->labels, batch_size) == batch_size;
      // Each rank trains on its slice of the global batch.
      std::optional<Batch> mine, next_mine;
      if (processes_) {
        mine = Batch{my_rows(batch->features), my_rows(batch->labels)};
        if (ahead) next_mine = Batch{my_rows(next->features), my_rows(next->labels)};
      }
      const Batch& now = mine ? *mine : *batch;
      const Batch* then = !ahead ? nullptr : next_mine ? &*next_mine : &*next;
      const HostBatch* next_features = then ? &then->features : nullptr;
      const HostBatch* next_labels = then ? &then->labels : nullptr;
      if (fed) {
        run.train_step_fed(next_features, next_labels);
      } else {
        run.train_step(now.features, now.labels, next_features, next_labels);
      }
      fed = ahead;
      if (!run.step_completed()) {  // mid-accumulation: no step to report or save
        batch = std::move(next);
        continue;
      }
      step = run.global_step();
      const bool last_step = last && step >= *last;
      const bool saves =
          config_.save_checkpoints_steps > 0 && step % config_.save_checkpoints_steps == 0;
      // Every loss is seen (a NaN reported) before a checkpoint and at the end.
      const bool stop = report(late && !saves && !last_step ? 2 : 0) || last_step;
      if (saves) {
        save();
        saved_at = step;
      }
      if (stop) break;
      batch = std::move(next);
    }
    report(0);  // the input ended: the last steps' losses
  } catch (...) {
    if (log_) log_->finish(step, loss);
    throw;
  }
  if (run.micro_batch() != 0) {
    // The input ended part-way through a step: its micro-batches are dropped
    // (the variables are still the last step's, which is what is saved).
    if (chief())
      detail::log().info("the input ended after {} of the {} micro-batches of step {}: dropped",
                         run.micro_batch(), config_.accumulate_steps, step + 1);
    run.discard_micro_batches();
  }
  if (saved_at != step || !b.restored) save();
  for (const auto& hook : hooks) hook->end();
  if (log_) log_->finish(step, loss);
  return step;
}

std::map<std::string, double> Estimator::train_and_evaluate(const InputFn& train_input,
                                                            const TrainSpec& spec,
                                                            const InputFn& eval_input,
                                                            std::uint64_t eval_every_steps) {
  if (eval_every_steps == 0) throw Error("train_and_evaluate: evaluate every 1 or more steps");
  if (!spec.steps && !spec.max_steps) {
    throw Error("train_and_evaluate: give the training steps or max_steps");
  }
  if (spec.steps && spec.max_steps) throw Error("train: give steps or max_steps, not both");
  std::uint64_t step = chief_global_step(chief_latest());
  const std::uint64_t last = spec.max_steps ? *spec.max_steps : last_step(step, *spec.steps);
  std::map<std::string, double> result;
  do {
    // Each round is a train() call of its own: its input resumes at the step.
    const std::uint64_t next = std::min(last, (step / eval_every_steps + 1) * eval_every_steps);
    const std::uint64_t reached = train(train_input, {.max_steps = next, .hooks = spec.hooks});
    result = evaluate(eval_input);
    if (reached < next) break;  // a hook stopped it, or the input ended
    step = reached;
  } while (step < last);
  return result;
}

std::map<std::string, double> Estimator::evaluate(const InputFn& input_fn,
                                                  std::optional<std::uint64_t> steps) {
  const std::optional<std::string> latest = chief_latest();
  if (!latest) {
    throw Error(fmt::format("evaluate: model_dir '{}' has no checkpoint; train the model first",
                            config_.model_dir));
  }
  std::unique_ptr<Input> input = input_fn(InputContext{});
  std::optional<Batch> batch = input->next();
  if (!batch) throw Error("evaluate: the input gave no batch");
  const std::int64_t batch_size = input->batch_size();
  Built& b = built(Mode::Eval, *batch, batch_size);
  TowerRun& run = *b.run;
  run.restore(*latest);  // training may have rewritten it since
  run.reset_metrics();
  std::int64_t examples = 0;
  for (std::uint64_t n = 0; batch && (!steps || n < *steps); ++n) {
    const std::int64_t rows = rows_of(batch->features, batch->labels, batch_size);
    pad(batch->features, batch_size);
    pad(batch->labels, batch_size);
    // Each rank its slice of the padded batch: every example counted once.
    run.evaluate_step(my_rows(batch->features), my_rows(batch->labels),
                      my_real_rows(rows, batch_size));
    examples += rows;
    batch = input->next();
  }
  std::map<std::string, double> results = run.metrics();
  results["global_step"] = static_cast<double>(run.global_step());
  results["examples"] = static_cast<double>(examples);
  if (log_) log_->evaluated(run.global_step(), results);
  return results;
}

HostBatch Estimator::predict(const InputFn& input_fn) {
  const std::optional<std::string> latest = chief_latest();
  if (!latest) {
    throw Error(fmt::format("predict: model_dir '{}' has no checkpoint; train the model first",
                            config_.model_dir));
  }
  std::unique_ptr<Input> input = input_fn(InputContext{});
  std::optional<Batch> batch = input->next();
  if (!batch) throw Error("predict: the input gave no batch");
  const std::int64_t batch_size = input->batch_size();
  Built& b = built(Mode::Predict, *batch, batch_size);
  TowerRun& run = *b.run;
  run.restore(*latest);  // training may have rewritten it since
  HostBatch out;
  for (; batch; batch = input->next()) {
    const std::int64_t rows = rows_of(batch->features, {}, batch_size);
    pad(batch->features, batch_size);
    HostBatch predictions = run.predict_step(my_rows(batch->features));
    // Every rank's rows on rank 0, in rank order: the batch's order.
    if (processes_) predictions = gather_rows(*processes_, predictions, "predict");
    for (const auto& [name, t] : predictions) out[name].append_rows(t.slice_rows(0, rows));
  }
  return out;
}

}  // namespace vkt
