// TowerRun's training step: each tower on its own thread feeds, runs and hands
// its gradients over bucket by bucket; then the update and the new weights.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "../runtime/vulkan/error.h"
#include "overlapped_exchange.h"
#include "sharding.h"
#include "tower_inputs.h"
#include "tower_run.h"

namespace vkt {

namespace {

using detail::input_name;
using detail::kExampleWeights;

}  // namespace

void TowerRun::plan_buckets() {
  // The executor places gradients in tensor order, which is the order the
  // backward pass makes (and so writes) them: buckets are consecutive runs of
  // that order, the first ready first.
  const Tower& first = towers_.front();
  std::vector<std::size_t> order(first.gradients.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return first.gradients[a].id() < first.gradients[b].id();
  });
  gradient_bucket_.assign(order.size(), 0);
  int bucket = 0;
  std::size_t bytes = 0;
  for (std::size_t k : order) {
    const std::size_t size =
        align_up(static_cast<std::size_t>(first.gradients[k].shape().elements()) * 4, 16);
    if (bytes > 0 && bytes + size > options_.bucket_bytes) {
      ++bucket;
      bytes = 0;
    }
    gradient_bucket_[k] = bucket;
    bytes += size;
  }
  buckets_ = bucket + 1;
}

std::vector<std::vector<Tensor>> TowerRun::ready_groups(const Tower& t) const {
  std::vector<std::vector<Tensor>> groups(static_cast<std::size_t>(buckets_));
  for (std::size_t k = 0; k < t.gradients.size(); ++k) {
    groups[static_cast<std::size_t>(gradient_bucket_[k])].push_back(t.gradients[k]);
  }
  return groups;
}

std::vector<HostBatch> TowerRun::shards_of(const HostBatch& features, const HostBatch& labels,
                                           std::optional<std::int64_t> real_examples) const {
  const int n = towers();
  HostBatch all;
  for (const auto& [key, value] : features) all[input_name(key, "features")] = value;
  for (const auto& [key, value] : labels) all[input_name(key, "labels")] = value;
  if (mode_ == Mode::Eval) {  // sharded with the batch: each tower its rows' weights
    const std::int64_t rows = tower_batch_ * n;
    std::vector<float> weights(static_cast<std::size_t>(rows), 1.0f);
    for (std::int64_t r = real_examples.value_or(rows); r < rows; ++r) weights[r] = 0.0f;
    all[kExampleWeights] = HostTensor::floats({rows}, weights);
  }
  std::vector<HostBatch> shards = shard(all, n);
  check_batch(shards.front());
  return shards;
}

void TowerRun::feed(int tower, const HostBatch& shard) {
  Tower& t = towers_[static_cast<std::size_t>(tower)];
  for (const auto& [name, value] : shard) {
    if (name == kExampleWeights && !t.takes_example_weights) continue;
    if (value.dtype == DType::F32) {
      t.executor->feed(name, value.f32);
    } else {
      t.executor->feed(name, value.i32);
    }
  }
}

std::vector<Ticket> TowerRun::run_towers(const HostBatch& features, const HostBatch& labels,
                                         std::optional<std::int64_t> real_examples,
                                         const NextBatch& next, bool fed) {
  const int n = towers();
  const std::vector<HostBatch> shards =
      fed ? std::vector<HostBatch>{} : shards_of(features, labels, real_examples);
  const std::vector<HostBatch> next_shards =
      next.features ? shards_of(*next.features, *next.labels, std::nullopt)
                    : std::vector<HostBatch>{};
  prefed_ = false;
  // Every tower draws its random numbers (dropout) for the global step, in
  // every variable mode: a resumed run draws what an uninterrupted one did.
  // A step's later micro-batches draw anew, each from a key of its own (the
  // first's is the step itself, as without accumulation; unsigned arithmetic wraps).
  const std::uint64_t step =
      global_step() + static_cast<std::uint64_t>(micro_) * 0x9E3779B97F4A7C15ull;
  const bool exchange = mode_ == Mode::Train && exchanges();
  std::vector<Ticket> done(static_cast<std::size_t>(n));
  const auto run_tower = [&](int i) {
    Tower& t = towers_[static_cast<std::size_t>(i)];
    Ticket ticket;
    try {
      if (!fed) feed(i, shards[static_cast<std::size_t>(i)]);
      t.executor->set_step(step);
      t.run_after.push_back(t.weights_arrived);
      ticket = t.executor->run(t.run_after);
      t.run_after.clear();
    } catch (...) {
      if (replica_sum_) replica_sum_->abort();  // the others may wait at a sum
      throw;
    }
    t.weights_arrived = Ticket{};
    if (losses_) losses_->record(static_cast<std::size_t>(i), ticket);
    // The next batch's shard goes to the other feed buffer while this step runs.
    if (!next_shards.empty()) feed(i, next_shards[static_cast<std::size_t>(i)]);
    // Each bucket goes as soon as the backward pass has written it.
    if (exchange) {
      for (int b = 0; b < buckets_; ++b) {
        hand_over(static_cast<std::size_t>(i), b, t.executor->ready(static_cast<std::size_t>(b)));
      }
    }
    done[static_cast<std::size_t>(i)] = ticket;  // not waited for: the step runs on
  };
  if (replica_sum_) replica_sum_->reset();
  try {
    if (threads_) {
      threads_->run(run_tower);
    } else {
      run_tower(0);  // one tower: on this thread
    }
  } catch (...) {
    prefed_ = false;
    // A tower failed part-way: what the others handed over is dropped, so
    // the next step starts clean (with accumulation, the step's earlier
    // micro-batches too: their sums may be half-added to).
    micro_ = 0;
    if (reducer_) reducer_->abandon();
    for (Share& share : shares_) {
      if (share.reducer) share.reducer->abandon();
    }
    throw;
  }
  prefed_ = !next_shards.empty();
  return done;
}

const TowerRun::StepTimes& TowerRun::last_step_times() const {
  if (slowest_unread_) {
    times_.slowest_tower = 0;
    for (const Tower& t : towers_) {
      times_.slowest_tower = std::max(times_.slowest_tower, t.executor->device_ms().value_or(0.0));
    }
    slowest_unread_ = false;
  }
  return times_;
}

void TowerRun::check_batch(const HostBatch& shard) const {
  const Tower& t = towers_.front();
  for (const auto& [name, value] : shard) {
    if (name == kExampleWeights) continue;
    const std::optional<Tensor> input = t.graph->find_input(name);
    if (!input) {
      throw Error(fmt::format("the batch has an entry '{}' that the model has no input for", name));
    }
    if (!t.executor->takes_input(name)) {
      throw Error(fmt::format(
          "the batch has an entry '{}' that the model does not use; leave it out", name));
    }
    if (input->dtype() != value.dtype || input->shape().elements() != value.shape.elements()) {
      throw Error(fmt::format(
          "the batch's '{}' holds {} values of shape {} per tower, but the model's input is {} "
          "of shape {}",
          name, to_string(value.dtype), value.shape.str(), to_string(input->dtype()),
          input->shape().str()));
    }
  }
}

void TowerRun::hand_over(std::size_t tower, int bucket, const Ticket& ready) {
  if (reducer_) reducer_->arrive(tower, bucket, ready);
  for (Share& share : shares_) {
    if (share.reducer) share.reducer->arrive(tower, bucket, ready);
  }
}

void TowerRun::weights_arrive(std::size_t tower, const Ticket& ticket) {
  Tower& t = towers_[tower];
  if (ticket.device == nullptr || ticket.value <= t.weights_arrived.value) return;
  t.weights_arrived = ticket;
  t.graph->set_last_run(ticket);  // the tower's own run is done: host access waits for this
}

void TowerRun::train_step_fed(const HostBatch* next_features, const HostBatch* next_labels) {
  if (!prefed_) {
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
  using Clock = std::chrono::steady_clock;
  const auto ms = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  const Clock::time_point start = Clock::now();
  if (pacing_.wait_two_back(devices_)) ++step_thread_waits_;
  // A step's later micro-batches add to its sums; its first overwrites them.
  const bool first = micro_ == 0;
  const bool last = micro_ + 1 == accumulate_;
  if (exchanges()) set_accumulating(!first);
  // A bad batch is refused before any tower runs, the step's earlier
  // micro-batches kept; a tower that fails drops the whole step (run_towers).
  // The step's last micro-batch: each bucket's sum over the processes starts
  // as soon as this process's is submitted.
  if (overlap_ && last) overlap_->begin(fmt::format("step {}", global_step() + 1));
  std::vector<Ticket> done;
  try {
    done = run_towers(features, labels, std::nullopt, {next_features, next_labels}, fed);
  } catch (...) {
    if (overlap_) overlap_->abandon();
    throw;
  }
  losses_->run_done(first);
  step_completed_ = false;
  const Clock::time_point towers_done = Clock::now();
  times_ = {ms(start, towers_done), 0, 0, 0};
  slowest_unread_ = true;
  const auto finish = [&] {
    if (step_completed_) losses_->step_done(global_step());
    pacing_.submitted(devices_);
    times_.step = ms(start, Clock::now());
  };
  if (!exchanges()) {
    step_completed_ = true;
    return finish();
  }
  const auto micro = static_cast<std::size_t>(micro_);  // the micro-batch just trained
  micro_ = last ? 0 : micro_ + 1;
  step_completed_ = last;
  if (!shares_.empty()) {
    step_round_robin(last);
    times_.apply = ms(towers_done, Clock::now());
    return finish();
  }
  // Every bucket's sum is submitted; the sparse rows are on their way, to
  // this micro-batch's slots.
  const Ticket summed = reducer_ ? reducer_->finish() : Ticket{};  // empty: all sparse
  sparse_arrived_.clear();
  for (std::size_t i = 0; i < towers_.size(); ++i) {
    const auto& copies = towers_[i].sparse_in;
    const std::size_t per = copies.size() / static_cast<std::size_t>(accumulate_);
    for (std::size_t c = micro * per; c < (micro + 1) * per; ++c) {
      sparse_arrived_.push_back(copies[c]->start({&done[i], 1})[0]);
    }
  }
  const Clock::time_point reduced = Clock::now();
  times_.reduce = ms(towers_done, reduced);
  if (!last) {
    wait_micro_batch({&summed, 1});
    return finish();
  }
  // Where the new weights reach a tower as a host write into its mapped memory
  // (lavapipe), the write waits for the source only; a model with state
  // variables (batch norm's moving averages) still has its towers' state
  // updates queued behind the gradients, which would land after the copied
  // averages. The towers' steps end first.
  if (!state_in_.empty()) {
    for (const Ticket& t : done) t.wait();
  }
  apply_step(summed, reduced);
  finish();
}

void TowerRun::apply_step(const Ticket& summed, std::chrono::steady_clock::time_point reduced) {
  using Clock = std::chrono::steady_clock;
  const auto ms = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  std::vector<Ticket> complete{summed};
  gradients_complete(complete);
  if (!master_) {  // Mirrored: the sum to every tower, each updates its own replica
    const std::span<const Ticket> arrived = broadcast_->start({complete.data(), 1});
    for (std::size_t i = 0; i < towers_.size(); ++i) {
      // Tower i's next step runs after its update on its own queue.
      towers_[i].updates->run(arrived.subspan(i, 1));
    }
    times_.apply = ms(reduced, Clock::now());
    return;
  }
  // The update runs after the sums on the consolidation device's queue.
  if (complete.front().device != nullptr) sparse_arrived_.push_back(complete.front());
  copy_state(sparse_arrived_);
  const Ticket applied = master_executor_->run(sparse_arrived_);
  const Clock::time_point updated = Clock::now();
  const std::span<const Ticket> arrived = broadcast_->start({&applied, 1});
  for (std::size_t i = 0; i < towers_.size(); ++i) {
    weights_arrive(i, arrived[i]);
    towers_[i].graph->set_global_step(master_->global_step());
  }
  times_.apply = ms(reduced, updated);
  times_.copy_back = ms(updated, Clock::now());
}

void TowerRun::set_accumulating(bool accumulate) {
  if (reducer_) reducer_->set_accumulate(accumulate);
  for (Share& share : shares_) {
    if (share.reducer) share.reducer->set_accumulate(accumulate);
  }
}

void TowerRun::wait_micro_batch(std::span<const Ticket> summed) {
  // The towers' next run overwrites the gradients these copies read, and the
  // next sums reuse the reducers' gathering buffers: where every tower is on
  // the ticket's Device, their next runs wait for it there; else the host waits.
  sparse_arrived_.insert(sparse_arrived_.end(), summed.begin(), summed.end());
  bool waited = false;
  for (const Ticket& ticket : sparse_arrived_) {
    if (ticket.device == nullptr) continue;
    const bool on_every_tower = std::all_of(
        towers_.begin(), towers_.end(), [&](const Tower& t) { return t.device == ticket.device; });
    if (!on_every_tower) {
      ticket.wait();
      waited = true;
      continue;
    }
    for (Tower& t : towers_) t.run_after.push_back(ticket);
  }
  sparse_arrived_.clear();
  if (waited) ++step_thread_waits_;
}

TowerRun::HostWaits TowerRun::host_waits() const {
  HostWaits waits{step_thread_waits_, 0};
  if (broadcast_) waits.step_thread += broadcast_->host_waits();
  for (const Tower& t : towers_) {
    for (const auto& copy : t.sparse_in) waits.step_thread += copy->host_waits();
  }
  if (reducer_) waits.tower_threads += reducer_->host_waits();
  for (const Share& share : shares_) {
    for (const auto& copy : share.weights_back) waits.step_thread += copy->host_waits();
    if (share.reducer) waits.tower_threads += share.reducer->host_waits();
  }
  for (const Device* device : devices_) waits.devices += device->host_waits();
  return waits;
}

}  // namespace vkt
