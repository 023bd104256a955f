#include "towers.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "../runtime/graph/ops/elementwise.h"
#include "../runtime/vulkan/error.h"
#include "gradient_exchange.h"
#include "optimizer_calls.h"
#include "replica_sum.h"
#include "sharding.h"
#include "step_losses.h"
#include "tower_inputs.h"

namespace vkt {

namespace {

using detail::input_name;
using detail::kExampleWeights;

/// Every input of the model by graph name, with its spec and "features" or
/// "labels"; vkt::Error when the batch does not divide among the towers.
std::map<std::string, std::pair<InputSpec, const char*>> model_inputs(const ModelContext& root,
                                                                      int n, int processes,
                                                                      bool weighted) {
  std::map<std::string, std::pair<InputSpec, const char*>> inputs;
  for (const auto* group : {&root.feature_specs(), &root.label_specs()}) {
    const char* kind = group == &root.feature_specs() ? "features" : "labels";
    for (const auto& [key, spec] : *group) {
      const std::string name = input_name(key, kind);
      if (spec.shape.rank() == 0 || (!weighted && spec.shape[0] % n != 0)) {
        // Across processes each holds its share of the global batch: the user
        // chose the global batch, and it must divide among every tower of the job.
        const std::int64_t rows = spec.shape.rank() == 0 ? 0 : spec.shape[0];
        const int p = processes;
        throw Error(
            p == 1 ? fmt::format("the batch of {} examples ('{}', shape {}) does not divide among "
                                 "{} towers; use a batch size that is a multiple of {}",
                                 rows, name, spec.shape.str(), n, n)
                   : fmt::format("the global batch of {} examples ('{}') does not divide among {} "
                                 "towers ({} processes x {}); use a batch size that is a multiple "
                                 "of {}",
                                 rows * p, name, n * p, p, n, n * p));
      }
      if (!inputs.emplace(name, std::pair{spec, kind}).second) {
        throw Error(fmt::format("a feature and a label are both named '{}'; rename one", name));
      }
    }
  }
  return inputs;
}

}  // namespace

Towers::Towers(ModelContext& root, const ModelFn& model_fn, int n, Mode mode, const Params& params,
               const Shares& shares, OptimizerCalls* calls, int rank, int processes,
               Precision precision, const std::function<Device&(int)>& device_of)
    : mode_(mode) {
  // Every check on the inputs before any device is made.
  const bool weighted = !shares.weights.empty();
  if (weighted && static_cast<int>(shares.weights.size()) != n) {
    throw Error(fmt::format(
        "ReplicateOptions::shard_weights has {} weights for {} towers; give one per tower or none",
        shares.weights.size(), n));
  }
  const auto inputs = model_inputs(root, n, processes, weighted);
  batch_ = inputs.empty() ? 0 : inputs.begin()->second.first.shape[0];
  const std::vector<std::int64_t> rows =
      weighted ? weighted_rows(batch_, shares.weights)
               : std::vector<std::int64_t>(static_cast<std::size_t>(n), batch_ / n);
  // One arena layout for every tower, however their devices align buffers
  // (the master and the shares take the towers' options, so the same).
  std::vector<Device*> devices;
  std::size_t alignment = root.graph_options().arena_alignment;
  for (int i = 0; i < n; ++i) {
    devices.push_back(&device_of(i));
    alignment = std::max(alignment, tensor_alignment(*devices.back()));
  }
  for (int i = 0; i < n; ++i) {
    Tower t;
    t.device = devices[static_cast<std::size_t>(i)];
    // Towers sharing a Device each take a compute queue of their own, where it has enough.
    std::uint32_t before = 0;
    for (const Tower& earlier : towers_) before += earlier.device == t.device ? 1 : 0;
    t.lane = before % t.device->compute_queues();
    if (precision != Precision::F32 && !t.device->info().storage_16bit) {
      const DeviceInfo& info = t.device->info();
      throw Error(fmt::format(
          "precision {}: device {} ({}) has no 16-bit storage buffers "
          "(storageBuffer16BitAccess), which {} products need; train in fp32 on it (--precision "
          "fp32)",
          to_string(precision), info.index, info.name, to_string(precision)));
    }
    GraphOptions graph_options = root.graph_options();
    graph_options.precision = precision;
    graph_options.arena_alignment = alignment;
    // Where the tower's shard starts in the global batch (dropout draws by it).
    t.rows = rows[static_cast<std::size_t>(i)];
    t.first = i == 0 ? 0 : towers_.back().first + towers_.back().rows;
    t.scale = shares.scale_of(t.rows, batch_);
    graph_options.first_row = static_cast<std::uint32_t>(rank * batch_ + t.first);
    t.graph = std::make_unique<Graph>(*t.device, graph_options);
    if (i > 0) t.graph->set_name_scope(fmt::format("tower_{}/", i));
    if (calls != nullptr) {
      t.graph->set_attachment(std::make_unique<TowerReplication>(i, n, t.scale, *calls, *t.graph));
    }
    TensorDict features("features"), labels("labels");
    for (const auto& [name, entry] : inputs) {
      std::vector<std::int64_t> dims = entry.first.shape.dims();
      dims[0] = t.rows;
      const Tensor in = t.graph->input(name, Shape(dims), entry.first.dtype);
      const bool is_feature = std::string(entry.second) == "features";
      const auto& specs = is_feature ? root.feature_specs() : root.label_specs();
      const std::string key = specs.count(name) ? name : "";
      (is_feature ? features : labels)[key] = in;
    }
    ModelContext ctx(*t.graph, i, n);
    if (!inputs.empty()) {
      const std::vector<float> ones(static_cast<std::size_t>(t.rows), 1.0f);
      ctx.set_example_weights(mode_ == Mode::Eval ? t.graph->input(kExampleWeights, {t.rows})
                                                  : t.graph->constant({t.rows}, ones));
      // Evaluation pads a short last batch: a loss given no weights leaves
      // the padding out all the same.
      if (mode_ == Mode::Eval) t.graph->set_example_weights(ctx.example_weights());
    }
    const Params tower_params = params;  // each tower its own copy
    t.spec = model_fn(ctx, features, labels, mode_, tower_params);
    if (mode_ != Mode::Predict && (!t.spec.loss.valid() || &t.spec.loss.graph() != t.graph.get())) {
      throw Error(
          fmt::format("the model function returned no loss (or one of another graph) on "
                      "tower {}; training needs the spec's loss",
                      i));
    }
    towers_.push_back(std::move(t));
  }
  if (n > 1) threads_ = std::make_unique<TowerThreads>(n);
}

// The threads first (declared last), then each tower's program before its graph.
Towers::~Towers() = default;

bool Towers::unequal() const {
  return std::any_of(towers_.begin(), towers_.end(),
                     [&](const Tower& t) { return t.rows != towers_.front().rows; });
}

void Towers::collect_gradients(const OptimizerCalls& calls) {
  for (std::size_t i = 0; i < towers_.size(); ++i) {
    Tower& t = towers_[i];
    t.scaled_loss = t.scale != 1.0f ? t.spec.loss * t.scale : t.spec.loss;
    for (const OptimizerCalls::Call& call : calls.calls) {
      for (const GradVar& gv : call.per_tower[i]) {
        if (gv.grad.sparse()) {  // its rows go to the master as they are, not summed
          t.gradients.push_back(gv.grad.values);
          t.gradients.push_back(gv.grad.indices);
        } else {
          t.gradients.push_back(gv.grad.dense);
        }
      }
    }
  }
}

std::vector<std::vector<Tensor>> Towers::ready_groups(const Tower& t,
                                                      const std::vector<int>& bucket_of,
                                                      int buckets) const {
  std::vector<std::vector<Tensor>> groups(static_cast<std::size_t>(buckets));
  for (std::size_t k = 0; k < t.gradients.size(); ++k) {
    groups[static_cast<std::size_t>(bucket_of[k])].push_back(t.gradients[k]);
  }
  return groups;
}

void Towers::build_training_programs(const std::vector<int>& bucket_of, int buckets,
                                     ProcessGroup* processes) {
  const int n = static_cast<int>(towers_.size());
  replica_sum_ = std::make_unique<ReplicaSum>(n, processes);
  for (int i = 0; i < n; ++i) {
    Tower& t = towers_[static_cast<std::size_t>(i)];
    std::vector<Tensor> fetches{t.scaled_loss};
    fetches.insert(fetches.end(), t.gradients.begin(), t.gradients.end());
    t.executor = std::make_unique<Executor>(
        *t.graph, fetches,
        ExecutorOptions{
            .training = true,
            .ready_groups = ready_groups(t, bucket_of, buckets),
            .timestamps = true,
            .double_buffered_feeds = true,
            .compute_queue = t.lane,
            .replica_sum = [sums = replica_sum_.get(), i](std::size_t, std::span<const float> local,
                                                          std::span<float> sum) {
              sums->exchange(i, local, sum);
            }});
  }
}

std::vector<HostBatch> Towers::shards_of(const HostBatch& features, const HostBatch& labels,
                                         std::optional<std::int64_t> real_examples) const {
  const int n = static_cast<int>(towers_.size());
  HostBatch all;
  for (const auto& [key, value] : features) all[input_name(key, "features")] = value;
  for (const auto& [key, value] : labels) all[input_name(key, "labels")] = value;
  if (mode_ == Mode::Eval) {  // sharded with the batch: each tower its rows' weights
    std::vector<float> weights(static_cast<std::size_t>(batch_), 1.0f);
    for (std::int64_t r = real_examples.value_or(batch_); r < batch_; ++r) weights[r] = 0.0f;
    all[kExampleWeights] = HostTensor::floats({batch_}, weights);
  }
  std::vector<std::int64_t> rows;
  for (const Tower& t : towers_) rows.push_back(t.rows);
  std::vector<HostBatch> shards = unequal() ? shard(all, rows) : shard(all, n);
  check_batch(shards.front());
  return shards;
}

void Towers::check_batch(const HostBatch& shard) const {
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

void Towers::feed(std::size_t tower, const HostBatch& shard) {
  Tower& t = towers_[tower];
  for (const auto& [name, value] : shard) {
    if (name == kExampleWeights && !t.takes_example_weights) continue;
    if (value.dtype == DType::F32) {
      t.executor->feed(name, value.f32);
    } else {
      t.executor->feed(name, value.i32);
    }
  }
}

std::vector<Ticket> Towers::run(const std::vector<HostBatch>& shards,
                                const std::vector<HostBatch>& next, std::uint64_t step,
                                StepLosses* losses, GradientExchange* exchange) {
  const bool fed = shards.empty();
  prefed_ = false;
  std::vector<Ticket> done(towers_.size());
  const auto run_tower = [&](int tower) {
    const auto i = static_cast<std::size_t>(tower);
    Tower& t = towers_[i];
    Ticket ticket;
    try {
      if (!fed) feed(i, shards[i]);
      t.executor->set_step(step);
      t.run_after.push_back(t.weights_arrived);
      ticket = t.executor->run(t.run_after);
      t.run_after.clear();
    } catch (...) {
      if (replica_sum_) replica_sum_->abort();  // the others may wait at a sum
      throw;
    }
    t.weights_arrived = Ticket{};
    if (losses != nullptr) losses->record(i, ticket);
    // The next batch's shard goes to the other feed buffer while this step runs.
    if (!next.empty()) feed(i, next[i]);
    // Each bucket goes as soon as the backward pass has written it.
    if (exchange != nullptr) {
      for (int b = 0; b < exchange->buckets(); ++b) {
        exchange->hand_over(i, b, t.executor->ready(static_cast<std::size_t>(b)));
      }
    }
    done[i] = ticket;  // not waited for: the step runs on
  };
  if (replica_sum_) replica_sum_->reset();
  if (threads_) {
    threads_->run(run_tower);
  } else {
    run_tower(0);  // one tower: on this thread
  }
  prefed_ = !next.empty();
  return done;
}

void Towers::weights_arrive(std::size_t i, const Ticket& ticket) {
  Tower& t = towers_[i];
  if (ticket.device == nullptr || ticket.value <= t.weights_arrived.value) return;
  t.weights_arrived = ticket;
  t.graph->set_last_run(ticket);  // the tower's own run is done: host access waits for this
}

void Towers::run_after(const Ticket& ticket) {
  for (Tower& t : towers_) t.run_after.push_back(ticket);
}

double Towers::slowest_device_ms() const {
  double slowest = 0;
  for (const Tower& t : towers_) slowest = std::max(slowest, t.executor->device_ms().value_or(0.0));
  return slowest;
}

}  // namespace vkt
