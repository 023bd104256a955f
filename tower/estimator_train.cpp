// Estimator::train: resume or warm start, the hooks, the training loop.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <set>

#include "../runtime/io/checkpoint.h"
#include "../runtime/io/checkpoint_manager.h"
#include "../runtime/mpi/process_group.h"
#include "../runtime/vulkan/detail/log.h"
#include "../runtime/vulkan/error.h"
#include "estimator.h"
#include "estimator_detail.h"
#include "hooks.h"
#include "process_batches.h"
#include "stop_signals.h"
#include "tower_run.h"
#include "training_log.h"
#include "warm_start.h"

namespace vkt {

namespace {

void check_train_spec(const TrainSpec& spec) {
  if (spec.steps && spec.max_steps) {
    throw Error("train: give steps or max_steps, not both");
  }
  if (spec.steps && *spec.steps == 0) throw Error("train: steps is 0; give 1 or more");
  for (std::size_t i = 0; i < spec.hooks.size(); ++i) {
    if (!spec.hooks[i]) throw Error(fmt::format("train: hook {} of TrainSpec.hooks is null", i));
  }
}

// Going on after a failed save would train steps that no checkpoint keeps, so
// training stops, saying where a restart picks up.
std::string failed_save(std::uint64_t step, const std::string& why,
                        const std::optional<std::string>& intact) {
  const std::string resume =
      intact ? fmt::format(
                   "training again with the same model_dir (a new process or Estimator) "
                   "resumes from the last intact checkpoint '{}'",
                   *intact)
             : std::string("no checkpoint was saved before, so training again starts over");
  return fmt::format(
      "training stopped at global step {}, its checkpoint could not be saved: {}; {}", step, why,
      resume);
}

}  // namespace

std::uint64_t Estimator::train(const InputFn& input_fn, const TrainSpec& spec) {
  check_train_spec(spec);
  std::optional<std::uint64_t> last;
  if (spec.steps) last = detail::last_step(chief_global_step(chief_latest()), *spec.steps);
  if (spec.max_steps) last = *spec.max_steps;
  for (;;) {
    try {
      if (const std::optional<std::uint64_t> reached = train_to(input_fn, spec, last)) {
        return *reached;
      }
    } catch (const DeviceLost& e) {
      handle_device_loss(e);
    }
  }
}

std::optional<std::uint64_t> Estimator::train_to(const InputFn& input_fn, const TrainSpec& spec,
                                                 std::optional<std::uint64_t> last) {
  const std::optional<std::string> latest = chief_latest();
  const std::uint64_t start = chief_global_step(latest);  // where the input resumes
  // Shards measured by an earlier run (ShardSplit::Measured) stay as they were.
  if (latest && chief() && !processes_) measured_shards_ = checkpoint_shard_weights(*latest);
  if (last && *last <= start) {
    detail::log().info("the model is at global step {}, max_steps is {}: nothing to train", start,
                       *last);
    return start;
  }
  if (chief()) detail::check_writable(config_.model_dir);
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
  start_from(b, latest);
  const std::int64_t step_examples = batch_size * config_.accumulate_steps;
  if (!b.started) {  // later calls continue this process's own rows and layout
    // Rows a stopped run logged past its last checkpoint are not this run's.
    if (log_) log_->forget_after(run.global_step());
    log_layout(run, step_examples);
    b.started = true;
  }
  std::optional<StopSignals> signals;
  if (config_.stop_on_signals) signals.emplace();

  const std::vector<std::shared_ptr<TrainingHook>> hooks = training_hooks(b, spec, step_examples);
  CheckpointManager checkpoints(config_.model_dir, config_.keep_checkpoint_max);
  if (chief()) {
    // A killed save's temporary file would stay forever (a checkpoint's size
    // each time a preempted job restarts); no other process saves here.
    const CheckpointManager::Removed removed = checkpoints.remove_interrupted_saves();
    if (removed.files > 0) {
      detail::log().info(
          "removed {} temporary file(s) ({:.1f} MiB) that interrupted saves left in '{}'",
          removed.files, static_cast<double>(removed.bytes) / (1 << 20), config_.model_dir);
    }
  }
  // Rank 0 writes; every rank holds the same variables. A failed save stops
  // every rank at this step with rank 0's message, rather than leaving the
  // others to time out in the next step's exchange.
  const auto save = [&] {
    std::string path, failed;
    if (chief()) {
      try {
        path =
            checkpoints.save(run.global_step(), [&](const std::string& file) { run.save(file); });
      } catch (const FileWriteError& e) {  // a lost device goes on as it is
        failed = failed_save(run.global_step(), e.what(), b.restored);
      }
    }
    if (processes_) {
      failed = processes_->broadcast(
          failed, 0,
          fmt::format("step {}: whether rank 0 saved its checkpoint", run.global_step()));
    }
    if (!failed.empty()) throw FileWriteError(failed);
    b.restored = chief() ? path : "rank 0's checkpoint";
    if (chief()) detail::log().debug("saved {}", path);
  };

  const bool late = takes_late_losses(hooks);
  for (const auto& hook : hooks) hook->begin();
  if (log_) log_->start(run.global_step(), last, step_examples, config_.save_summary_steps);
  std::uint64_t step = run.global_step();
  std::uint64_t saved_at = step;
  float loss = 0;
  int stopped_by = 0;  // the signal that stopped training
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
      const std::int64_t rows = detail::rows_of(batch->features, batch->labels, batch_size);
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
      const bool ahead =
          next && detail::rows_of(next->features, next->labels, batch_size) == batch_size;
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
      // Measured shards: saved with the weights, then rebuilt on them (train()).
      const std::optional<std::vector<double>> weights =
          last_step ? std::nullopt : run.measured_shard_weights();
      // Every loss is seen (a NaN reported) before a checkpoint and at the end.
      const bool stop = report(late && !saves && !weights && !last_step ? 2 : 0) || last_step;
      if (saves || (weights && !stop)) {
        save();
        saved_at = step;
      }
      if (stop) break;
      if (weights) {
        reshard(*weights, step);
        return std::nullopt;
      }
      stopped_by = signals ? stop_requested(step) : 0;
      if (stopped_by != 0) break;
      batch = std::move(next);
    }
    report(0);  // the input ended: the last steps' losses
  } catch (const Error& e) {
    if (log_) log_->finish(step, loss);
    // A lost device may surface through another part's error (a copy, a
    // sum): the run's Devices say whether one was lost.
    const std::vector<TowerRun::LostTower> lost = run.lost_towers();
    if (dynamic_cast<const DeviceLost*>(&e) == nullptr && !lost.empty()) {
      throw DeviceLost(e.what(), lost.front().device);
    }
    throw;
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
  // A temporary model_dir goes with a stopped run: nothing to save there.
  if ((saved_at != step || !b.restored) && !(stopped_by != 0 && own_model_dir_)) {
    try {
      save();
    } catch (...) {  // the log still ends at the last step, as after a failure in the loop
      if (log_) log_->finish(step, loss);
      throw;
    }
  }
  for (const auto& hook : hooks) hook->end();
  log_loss_scale(run);
  if (log_) log_->finish(step, loss);
  if (stopped_by != 0) end_stopped_training(b.restored.value_or(""), step, stopped_by);
  return step;
}

void Estimator::reshard(const std::vector<double>& weights, std::uint64_t step) {
  measured_shards_ = weights;
  if (chief()) {
    std::vector<std::string> parts;
    for (const double w : weights) parts.push_back(fmt::format("{:.3g}", w));
    detail::log().info(
        "measured the towers' speeds after global step {} (examples per ms: {}): sharding the "
        "batch by them from now on",
        step, fmt::join(parts, ", "));
  }
  built_.clear();  // rebuilt with the new shards from the checkpoint just saved
}

void Estimator::end_stopped_training(const std::string& saved, std::uint64_t step, int signal) {
  if (chief()) {
    const std::string line =
        own_model_dir_ ? fmt::format(
                             "stopped by {} at global step {}; the model directory was temporary "
                             "and is removed (give one to keep a stopped run)",
                             StopSignals::describe(signal), step)
                       : fmt::format(
                             "stopped by {} at global step {}: saved {}; train again with the same "
                             "model directory to resume",
                             StopSignals::describe(signal), step, saved);
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  end_by_signal(signal);
}

int Estimator::stop_requested(std::uint64_t step) const {
  int signal = StopSignals::pending();
  if (!processes_) return signal;
  // Every rank stops at the same step, or the next exchange would wait for
  // the ranks that stopped.
  double asked[2] = {signal != 0 ? 1.0 : 0.0, static_cast<double>(signal)};
  processes_->allreduce_sum(std::span<double>(asked, 2),
                            fmt::format("step {}: whether a rank was asked to stop", step));
  if (asked[0] == 0) return 0;
  // A rank that got no signal ends by the one the others got.
  return signal != 0 ? signal : static_cast<int>(asked[1] / asked[0]);
}

void Estimator::end_by_signal(int signal) {
  std::fflush(stdout);
  built_.clear();  // the devices, before the directory they may still write to
  if (own_model_dir_) {
    std::error_code ec;
    std::filesystem::remove_all(config_.model_dir, ec);
  }
  StopSignals::end_process(signal);
}

void Estimator::log_layout(TowerRun& run, std::int64_t step_examples) const {
  if (!chief()) return;
  std::set<std::uint32_t> physical;
  std::vector<std::string> names;
  for (int i = 0; i < run.towers(); ++i) {
    const DeviceInfo& info = run.tower_graph(i).device().info();
    if (physical.insert(info.index).second) names.push_back(info.name);
  }
  const int processes = processes_ ? processes_->size() : 1;
  const int towers = run.towers() * processes;
  detail::log().info("training {} tower{} ({} on {} device{}: {}{}), {}, global batch {}{}", towers,
                     towers == 1 ? "" : "s", run.towers(), physical.size(),
                     physical.size() == 1 ? "" : "s", fmt::join(names, ", "),
                     processes == 1 ? "" : fmt::format("; in each of {} processes", processes),
                     run.precision_description(), step_examples,
                     config_.accumulate_steps == 1
                         ? ""
                         : fmt::format(" ({} micro-batches of {})", config_.accumulate_steps,
                                       step_examples / config_.accumulate_steps));
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
  const std::uint64_t last =
      spec.max_steps ? *spec.max_steps : detail::last_step(step, *spec.steps);
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

void Estimator::start_from(Built& b, const std::optional<std::string>& latest) {
  TowerRun& run = *b.run;
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
}

std::vector<std::shared_ptr<TrainingHook>> Estimator::training_hooks(const Built& b,
                                                                     const TrainSpec& spec,
                                                                     std::int64_t step_examples) {
  std::vector<std::shared_ptr<TrainingHook>> hooks = b.hooks;
  hooks.insert(hooks.end(), spec.hooks.begin(), spec.hooks.end());
  // A loss-scaled run skips a step with an inf or NaN loss and goes on.
  constexpr std::uint32_t kSkipsInARow = 30;  // the scale halved 30 times: 2^16 -> 2^-14
  hooks.push_back(std::make_shared<NanLossHook>(b.run->scales_loss() ? kSkipsInARow : 0));
  if (config_.log_step_count_steps > 0) {
    TowerRun* run = b.run.get();
    hooks.push_back(std::make_shared<LoggingHook>(
        config_.log_step_count_steps, step_examples, [this, run](const StepRate& r) {
          if (!log_) return;
          log_->rate(r);
          // Read with the losses: no wait.
          const auto& taken = run->taken_loss_scale();
          if (!taken) return log_loss_scale(*run);
          log_->loss_scale(taken->step, taken->scale, taken->skipped_steps);
        }));
  }
  return hooks;
}

void Estimator::log_loss_scale(TowerRun& run) {
  // Two scalars read after the steps in flight (the scale is decided on the
  // device), so they are the values at the run's global step, not at the
  // (earlier) step whose loss is being reported.
  if (!log_ || !run.scales_loss()) return;
  log_->loss_scale(run.global_step(), run.variable("loss_scale/scale")[0],
                   run.variable("loss_scale/skipped_steps")[0]);
}

bool Estimator::takes_late_losses(const std::vector<std::shared_ptr<TrainingHook>>& hooks) const {
  // Each step's loss goes to the hooks and the log two steps late where every
  // hook takes that (the step thread then never waits for a loss), else at once.
  bool late = std::all_of(hooks.begin(), hooks.end(),
                          [](const auto& hook) { return hook->takes_late_losses(); });
  if (processes_) {  // reading the losses is collective: every rank alike
    double late_ranks = late ? 1.0 : 0.0;
    processes_->allreduce_sum(std::span<double>(&late_ranks, 1), "whether hooks take late losses");
    late = late_ranks == static_cast<double>(processes_->size());
  }
  return late;
}

}  // namespace vkt
