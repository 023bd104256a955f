#include "estimator.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <random>

#include "../runtime/io/checkpoint.h"
#include "../runtime/io/checkpoint_manager.h"
#include "../runtime/mpi/process_group.h"
#include "../runtime/vulkan/detail/log.h"
#include "../runtime/vulkan/error.h"
#include "estimator_detail.h"
#include "hooks.h"
#include "process_batches.h"
#include "replicate.h"
#include "stop_signals.h"
#include "tower_device_pool.h"
#include "tower_run.h"
#include "training_log.h"

namespace vkt {

namespace fs = std::filesystem;
using detail::pad;
using detail::rows_of;

namespace {

constexpr const char* kTemporaryPrefix = "vktower-";

// "vktower-<pid>-<hex>": the process that made it, alive or not.
std::optional<pid_t> maker_of(const std::string& name) {
  if (name.rfind(kTemporaryPrefix, 0) != 0) return std::nullopt;
  const std::size_t begin = std::strlen(kTemporaryPrefix), dash = name.find('-', begin);
  if (dash == std::string::npos || dash == begin || dash - begin > 9) return std::nullopt;
  pid_t pid = 0;
  for (std::size_t i = begin; i < dash; ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    pid = pid * 10 + (name[i] - '0');
  }
  return pid;
}

// A run that was killed (SIGKILL, a second Ctrl-C) could not remove its
// temporary model directory; the next run does, once its maker is gone.
void remove_stale_model_dirs(const fs::path& temp) {
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(temp, ec)) {
    const std::optional<pid_t> pid = maker_of(entry.path().filename().string());
    struct stat info {};
    if (!pid || ::lstat(entry.path().c_str(), &info) != 0 || !S_ISDIR(info.st_mode) ||
        info.st_uid != ::getuid() || *pid == ::getpid() || ::kill(*pid, 0) == 0 || errno != ESRCH) {
      continue;
    }
    std::error_code removed;
    fs::remove_all(entry.path(), removed);
    if (!removed) {
      detail::log().info("removed {}, the temporary model directory of a run that was killed",
                         entry.path().string());
    }
  }
}

std::string temporary_model_dir() {
  const fs::path temp = fs::temp_directory_path();
  remove_stale_model_dirs(temp);
  std::random_device random;
  fs::path dir;
  do {  // a new name: the directory is removed at the end, so it must be ours
    dir = temp / fmt::format("{}{}-{:08x}", kTemporaryPrefix, ::getpid(), random());
  } while (fs::exists(dir));
  detail::log().info("no model_dir given: using temporary directory {} (removed at the end)",
                     dir.string());
  return dir.string();
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

}  // namespace

std::uint64_t detail::last_step(std::uint64_t start, std::uint64_t steps) {
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  if (steps > kMax - start) {
    throw Error(fmt::format(
        "train: steps {} from global step {} would pass the largest global step {}; give 1 to "
        "{} steps",
        steps, start, kMax, kMax - start));
  }
  return start + steps;
}

std::int64_t detail::rows_of(const HostBatch& features, const HostBatch& labels,
                             std::int64_t batch_size) {
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

void detail::pad(HostBatch& batch, std::int64_t rows) {
  for (auto& [name, t] : batch) {
    if (t.rows() < rows) t = t.padded_rows(rows);
  }
}

/// Refuses a model_dir that takes no file before the first step runs: the
/// first checkpoint would fail only after training (a read-only directory).
void detail::check_writable(const std::string& dir) {
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

TowerDevicePool& Estimator::device_pool() {
  if (config_.device_pool != nullptr) return *config_.device_pool;
  if (!devices_) devices_ = std::make_unique<TowerDevicePool>();
  return *devices_;
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
  // Rank 0 writes the checkpoints; every other rank holds the same variables
  // in its trained model (or one restored from rank 0's checkpoint).
  if (!chief()) {
    for (const Mode mode : {Mode::Train, Mode::Eval, Mode::Predict}) {
      const auto it = built_.find(mode);
      if (it != built_.end()) return it->second->run->variable_value(name);
    }
  }
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
  root.set_distribution({.processes = processes_,
                         .accumulate_steps = config_.accumulate_steps,
                         .lost_towers = lost_towers_,
                         .measured_shard_weights = measured_shards_});
  root.set_device_pool(&device_pool());
  EstimatorSpec spec = model_fn_(root, {}, {}, mode, params_);
  if (!spec.run) throw Error("internal: a replicated model function returned no run");
  b->run = spec.run;
  b->hooks = spec.training_hooks;
  std::unique_ptr<Built>& kept = built_[mode];  // only once the model is built
  kept = std::move(b);
  return *kept;
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
  std::optional<StopSignals> signals;
  if (config_.stop_on_signals) signals.emplace();
  std::int64_t examples = 0;
  for (std::uint64_t n = 0; batch && (!steps || n < *steps); ++n) {
    if (const int signal = signals ? StopSignals::pending() : 0) end_by_signal(signal);
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
  std::optional<StopSignals> signals;
  if (config_.stop_on_signals) signals.emplace();
  HostBatch out;
  for (; batch; batch = input->next()) {
    if (const int signal = signals ? StopSignals::pending() : 0) end_by_signal(signal);
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
