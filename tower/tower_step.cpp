// TowerRun's training step: the towers run, each handing its gradients to the
// exchange bucket by bucket; then the update and the new weights.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "../runtime/vulkan/error.h"
#include "gradient_exchange.h"
#include "tower_run.h"
#include "towers.h"
#include "weight_update.h"

namespace vkt {

namespace {

using Clock = std::chrono::steady_clock;

double ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

std::vector<Ticket> TowerRun::run_towers(const HostBatch& features, const HostBatch& labels,
                                         std::optional<std::int64_t> real_examples,
                                         const NextBatch& next, bool fed) {
  const std::vector<HostBatch> shards =
      fed ? std::vector<HostBatch>{} : towers_->shards_of(features, labels, real_examples);
  const std::vector<HostBatch> next_shards =
      next.features ? towers_->shards_of(*next.features, *next.labels, std::nullopt)
                    : std::vector<HostBatch>{};
  // Every tower draws its random numbers (dropout) for the global step, in
  // every variable mode: a resumed run draws what an uninterrupted one did.
  // A step's later micro-batches draw anew, each from a key of its own (the
  // first's is the step itself, as without accumulation; unsigned arithmetic wraps).
  const std::uint64_t step =
      global_step() + static_cast<std::uint64_t>(micro_) * 0x9E3779B97F4A7C15ull;
  try {
    return towers_->run(shards, next_shards, step, losses_.get(),
                        mode_ == Mode::Train ? exchange_.get() : nullptr);
  } catch (...) {
    // A tower failed part-way: the step is dropped (with accumulation, its
    // earlier micro-batches too: their sums may be half-added to), and what
    // the others handed over with it (train()).
    micro_ = 0;
    throw;
  }
}

const TowerRun::StepTimes& TowerRun::last_step_times() const {
  if (slowest_unread_) {
    times_.slowest_tower = towers_->slowest_device_ms();
    slowest_unread_ = false;
  }
  return times_;
}

void TowerRun::train_step_fed(const HostBatch* next_features, const HostBatch* next_labels) {
  if (!towers_->prefed()) {
    throw Error(
        "train_step_fed: no batch was fed for this step; give it as the next batch of the "
        "previous train_step");
  }
  static const HostBatch none;
  train(none, none, next_features, next_labels, /*fed=*/true);
}

void TowerRun::train_step(const HostBatch& features, const HostBatch& labels,
                          const HostBatch* next_features, const HostBatch* next_labels) {
  train(features, labels, next_features, next_labels, /*fed=*/false);
}

void TowerRun::train(const HostBatch& features, const HostBatch& labels,
                     const HostBatch* next_features, const HostBatch* next_labels, bool fed) {
  if (mode_ != Mode::Train) throw Error("train_step: this model was built for another mode");
  if ((next_features == nullptr) != (next_labels == nullptr)) {
    throw Error("train_step: give the next batch's features and labels together, or neither");
  }
  const Clock::time_point start = Clock::now();
  if (pacing_.wait_two_back(devices_)) ++step_thread_waits_;
  // A step's later micro-batches add to its sums; its first overwrites them.
  // On its last, each bucket's sum over the processes starts as soon as this
  // process's is submitted. A bad batch is refused before any tower runs, the
  // step's earlier micro-batches kept; a tower that fails drops the whole
  // step (run_towers).
  const bool first = micro_ == 0;
  const bool last = micro_ + 1 == accumulate_;
  if (exchanges()) exchange_->begin(first, last, fmt::format("step {}", global_step() + 1));
  std::vector<Ticket> done;
  try {
    done = run_towers(features, labels, std::nullopt, {next_features, next_labels}, fed);
  } catch (...) {
    if (exchange_) exchange_->abandon();  // the next step starts clean
    throw;
  }
  losses_->run_done(first);
  const Clock::time_point towers_done = Clock::now();
  times_ = {ms(start, towers_done), 0, 0, 0};
  slowest_unread_ = true;
  const auto micro = static_cast<std::size_t>(micro_);  // the micro-batch just trained
  step_completed_ = last;
  if (exchanges()) {
    micro_ = last ? 0 : micro_ + 1;
    exchange_and_apply(done, micro, last, towers_done);
  }
  if (step_completed_) {
    losses_->step_done(global_step(), update_ ? update_->scale_updated() : Ticket{});
  }
  pacing_.submitted(devices_);
  times_.step = ms(start, Clock::now());
}

void TowerRun::exchange_and_apply(std::span<const Ticket> done, std::size_t micro, bool last,
                                  Clock::time_point towers_done) {
  // Every bucket's sum is submitted; the sparse rows are on their way, to
  // this micro-batch's slots.
  GradientExchange::Summed summed = exchange_->finish_micro_batch(micro, done);
  const Clock::time_point reduced = Clock::now();
  times_.reduce = ms(towers_done, reduced);
  if (!last) {
    if (exchange_->wait_micro_batch(summed, *towers_)) ++step_thread_waits_;
    return;
  }
  exchange_->complete(summed, fmt::format("step {}", global_step() + 1));
  times_.processes = exchange_->processes_ms();
  const Clock::time_point updated = update_->apply(summed, done, *towers_);
  times_.apply = ms(reduced, updated);
  times_.copy_back = ms(updated, Clock::now());
}

TowerRun::HostWaits TowerRun::host_waits() const {
  HostWaits waits{step_thread_waits_, 0};
  if (update_) waits.step_thread += update_->host_waits();
  if (exchange_) {
    waits.step_thread += exchange_->step_thread_waits();
    waits.tower_threads += exchange_->tower_thread_waits();
  }
  for (const Device* device : devices_) waits.devices += device->host_waits();
  return waits;
}

}  // namespace vkt
