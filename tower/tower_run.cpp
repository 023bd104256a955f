#include "tower_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "../optimizers/replication.h"
#include "../runtime/graph/ops/elementwise.h"
#include "../runtime/io/checkpoint.h"
#include "../runtime/mpi/process_group.h"
#include "../runtime/vulkan/error.h"
#include "../runtime/vulkan/instance.h"
#include "device_list.h"
#include "gradient_exchange.h"
#include "optimizer_calls.h"
#include "tower_inputs.h"
#include "towers.h"
#include "weight_update.h"

namespace vkt {

namespace {

using detail::kExampleWeights;

void validate_export(const std::string& name, const ExportOutput& output) {
  const auto has_only = [&](std::initializer_list<const char*> allowed) {
    for (const auto& [key, tensor] : output.outputs) {
      if (std::find_if(allowed.begin(), allowed.end(), [&](const char* a) { return key == a; }) ==
          allowed.end()) {
        return false;
      }
    }
    return !output.outputs.empty();
  };
  if (output.kind == ExportOutput::Kind::Regression && !has_only({"value"})) {
    throw Error(
        fmt::format("export output '{}': a regression output holds one tensor named "
                    "\"value\"",
                    name));
  }
  if (output.kind == ExportOutput::Kind::Classification && !has_only({"scores", "classes"})) {
    throw Error(
        fmt::format("export output '{}': a classification output holds \"scores\" "
                    "and/or \"classes\"",
                    name));
  }
  if (output.outputs.empty()) throw Error(fmt::format("export output '{}' is empty", name));
}

}  // namespace

TowerRun::TowerRun(ModelContext& root, const ModelFn& model_fn, const ReplicateOptions& options,
                   Mode mode, const Params& params)
    : options_(options), mode_(mode), calls_(std::make_unique<OptimizerCalls>()) {
  if (root.is_tower()) {
    throw Error(
        "a replicated model function is called with a root ModelContext (the instance "
        "and the global batch's inputs), not a tower's");
  }
  pool_ = root.device_pool();
  Instance& instance = root.instance();
  // A list the program passed is taken as given; only the default choice
  // consults VKT_DEVICES.
  for (const std::uint32_t index : options.devices) (void)instance.device(index);
  distribution_ = root.distribution();
  const std::vector<std::uint32_t> devices = remaining_devices(
      options.devices.empty() ? device_list_from_environment(instance) : options.devices);
  const int n = static_cast<int>(devices.size());
  if (options.consolidation_device) (void)instance.device(*options.consolidation_device);
  if (options.bucket_bytes == 0) {
    throw Error("ReplicateOptions::bucket_bytes is 0; give the bucket size in bytes (e.g. 4 MiB)");
  }
  if (options.exchange_dtype == DType::I32) {
    throw Error(
        "ReplicateOptions::exchange_dtype is i32; gradients travel as F32, F16 or BF16 (the "
        "samples' --exchange-dtype fp32|fp16|bf16)");
  }
  if (options.weight_copy_dtype == DType::I32) {
    throw Error(
        "ReplicateOptions::weight_copy_dtype is i32; weights travel as F32, F16 or BF16 (the "
        "samples' --weight-copy-dtype fp32|fp16|bf16)");
  }
  if (distribution_.accumulate_steps < 1) {
    throw Error(fmt::format(
        "Distribution::accumulate_steps is {}; give 1 or more micro-batches per step (1: no "
        "accumulation)",
        distribution_.accumulate_steps));
  }
  accumulate_ = mode == Mode::Train ? distribution_.accumulate_steps : 1;
  // Replicas record their optimizer calls in every mode; training sums them.
  // A scaled loss is checked and its step skipped on the consolidation device,
  // so it takes that path even on one tower.
  if (mode == Mode::Train) calls_->loss_scaling = loss_scaling_of(options);
  if (calls_->loss_scaling) check_loss_scale_options(*calls_->loss_scaling);
  if (calls_->loss_scaling && options.variable_mode == VariableMode::RoundRobin) {
    throw Error(
        "dynamic loss scaling (--loss-scale dynamic, or fp16 precision) needs one place that "
        "decides each step's skip: use VariableMode::SharedLocalParameterServer (the default) "
        "or Mirrored, not RoundRobin, or turn it off (--loss-scale off)");
  }
  const bool replicas = n > 1 || processes() > 1 || accumulate_ > 1 || calls_->loss_scaling;
  const Towers::Shares shares{shard_weights(n, mode), [&](std::int64_t rows, std::int64_t batch) {
                                return loss_scale(rows, batch, n, mode);
                              }};
  towers_ = std::make_unique<Towers>(
      root, model_fn, n, mode, params, shares, replicas ? calls_.get() : nullptr, rank(),
      processes(), options.precision,
      [&](int i) -> Device& { return tower_device(instance, devices, i); });
  if (mode != Mode::Train) {
    build_eval_predict();
  } else if (!replicas) {
    build_one_tower();
  } else {
    build_training(instance, devices);
  }
  if (processes() > 1) join_processes(root);
  devices_ = all_devices();
}

bool TowerRun::scales_loss() const {
  return calls_->loss_scaling.has_value();
}

std::string TowerRun::precision_description() const {
  const std::string precision = to_string(options_.precision);
  if (!calls_->loss_scaling) return precision;
  return fmt::format("{} with dynamic loss scaling from {}", precision,
                     calls_->loss_scaling->initial_scale);
}

int TowerRun::processes() const {
  return distribution_.processes ? distribution_.processes->size() : 1;
}

int TowerRun::rank() const {
  return distribution_.processes ? distribution_.processes->rank() : 0;
}

float TowerRun::loss_scale(std::int64_t rows, std::int64_t batch, int towers, Mode mode) const {
  // A shard's mean weighs rows / (batch x processes): its part of the global
  // batch (1/N of it for equal shards, N every tower of every process). With
  // k micro-batches every reduction is also scaled by 1/k: one batch of kB on
  // n towers sums the towers' per-shard losses (means over kB/n examples for
  // Mean, sums for Sum); k micro-batches of B sum k times as many terms
  // (means over B/n), so 1/k makes the summed gradients equal in both cases.
  const double k = mode == Mode::Train ? static_cast<double>(accumulate_) : 1.0;
  if (options_.loss_reduction == LossReduction::Sum) return static_cast<float>(1.0 / k);
  const double p = static_cast<double>(processes());
  // Equal shards: 1 / (N k) exactly as before, whatever the batch.
  if (batch == 0 || rows * towers == batch) {
    return static_cast<float>(1.0 / (static_cast<double>(towers) * p * k));
  }
  return static_cast<float>(static_cast<double>(rows) / (static_cast<double>(batch) * p * k));
}

void TowerRun::build_eval_predict() {
  if (mode_ == Mode::Eval) check_eval_metrics();
  // Evaluation and prediction: each tower runs on its own; nothing to reduce
  // on the device (the metrics' sums add up on the host).
  for (int i = 0; i < towers(); ++i) {
    Towers::Tower& t = (*towers_)[static_cast<std::size_t>(i)];
    std::vector<Tensor> fetches;
    if (mode_ == Mode::Eval) {
      t.scaled_loss = t.scale != 1.0f ? t.spec.loss * t.scale : t.spec.loss;
      fetches.push_back(t.scaled_loss);
      for (const auto& [name, metric] : t.spec.eval_metric_ops) {
        for (const Tensor& a : metric.accumulators) {
          if (metric.per_example && (a.shape().rank() == 0 || a.shape()[0] != t.rows)) {
            throw Error(fmt::format(
                "metric '{}' is per-example, but its accumulator '{}' has shape {}, not "
                "[{}, ...] (the tower's batch first)",
                name, a.name(), a.shape().str(), t.rows));
          }
        }
        t.accumulators.insert(t.accumulators.end(), metric.accumulators.begin(),
                              metric.accumulators.end());
        if (i == 0) sums_[name] = std::vector<std::vector<double>>(metric.accumulators.size());
      }
      fetches.insert(fetches.end(), t.accumulators.begin(), t.accumulators.end());
    } else {
      for (const auto& [name, output] : t.spec.export_outputs) {
        validate_export(name, output);
        for (const auto& [key, tensor] : output.outputs) {
          t.spec.predictions[name + "/" + key] = tensor;
        }
      }
      if (t.spec.predictions.empty()) {
        throw Error("the model function returned no predictions for Mode::Predict");
      }
      for (const auto& [name, tensor] : t.spec.predictions) {
        if (tensor.shape().rank() == 0) {
          throw Error(
              fmt::format("prediction '{}' is a scalar; predictions need a batch "
                          "dimension 0 to line up with the input",
                          name));
        }
        fetches.push_back(tensor);
      }
    }
    t.executor = std::make_unique<Executor>(*t.graph, fetches, ExecutorOptions{.training = false});
    t.takes_example_weights = t.executor->takes_input(kExampleWeights);
  }
}

void TowerRun::build_one_tower() {
  Towers::Tower& t = towers_->front();
  std::vector<Tensor> fetches{t.spec.loss};
  if (t.spec.train_op.valid()) fetches.push_back(t.spec.train_op);
  // Every optimizer call runs, not only the one that became the train op:
  // on N towers each TowerOptimizer call is applied, and one tower must
  // train the same model (wide & deep returns one of its two calls).
  for (const Node& node : t.graph->nodes()) {
    if (node.op->updates_variables() && node.output.id() != t.spec.train_op.id()) {
      fetches.push_back(node.output);
    }
  }
  t.scaled_loss = t.spec.loss;
  t.executor = std::make_unique<Executor>(
      *t.graph, fetches, ExecutorOptions{.timestamps = true, .double_buffered_feeds = true});
  build_losses();
}

void TowerRun::build_losses() {
  std::vector<BufferRange> losses;
  std::vector<std::uint32_t> lanes;
  for (const Towers::Tower& t : *towers_) {
    losses.push_back(t.executor->range(t.scaled_loss));
    lanes.push_back(t.lane);
  }
  losses_ = std::make_unique<StepLosses>(losses, lanes, accumulate_);
  if (update_ && calls_->loss_scaling) {
    if (const auto state = update_->loss_scale_state()) {
      losses_->watch_loss_scale(state->range, state->lane);
    }
  }
}

const std::optional<LossScaleState>& TowerRun::taken_loss_scale() const {
  static const std::optional<LossScaleState> none;
  return losses_ ? losses_->taken_loss_scale() : none;
}

void TowerRun::check_calls() const {
  const int n = towers();
  for (int i = 0; i < n; ++i) {
    const auto* replication = static_cast<const TowerReplication*>(
        (*towers_)[static_cast<std::size_t>(i)].graph->attachment());
    if (replication->calls_made() != static_cast<int>(calls_->calls.size())) {
      throw Error(
          fmt::format("tower {} made {} optimizer call(s) but tower 0 made {}; every tower "
                      "must make the same optimizer calls in the same order",
                      i, replication->calls_made(), calls_->calls.size()));
    }
  }
  if (calls_->calls.empty()) {
    throw Error(
        fmt::format("the model function made no TowerOptimizer call: training on {} tower(s) x {} "
                    "process(es) with {} micro-batch(es) per step needs one (train_op = "
                    "tower_optimizer.minimize(loss))",
                    n, processes(), accumulate_));
  }
  if (options_.variable_mode == VariableMode::SharedLocalParameterServer) return;
  for (const OptimizerCalls::Call& call : calls_->calls) {
    for (const GradVar& gv : call.per_tower[0]) {
      if (!gv.grad.sparse()) continue;
      throw Error(fmt::format(
          "variable '{}' has a sparse (embedding) gradient: sparse gradients on several "
          "towers need VariableMode::SharedLocalParameterServer (the default variable "
          "mode), not {}; use it, or run on one tower of one process without accumulation",
          gv.var.name(),
          options_.variable_mode == VariableMode::Mirrored ? "Mirrored" : "RoundRobin"));
    }
  }
}

void TowerRun::build_training(const Instance& root, const std::vector<std::uint32_t>& devices) {
  check_calls();
  // Mirrored: the towers' own updates first, so their slots (variables) are
  // in the step programs' variable arenas.
  std::vector<std::vector<Tensor>> mirrored;
  if (options_.variable_mode == VariableMode::Mirrored) {
    mirrored = record_mirrored_updates(*towers_, *calls_);
  }
  towers_->collect_gradients(*calls_);
  const GradientBuckets buckets =
      plan_gradient_buckets(towers_->front().gradients, options_.bucket_bytes);
  towers_->build_training_programs(buckets.of_gradient, buckets.count, distribution_.processes);
  const UpdatePlacement placement{&root, devices, &options_, device_options()};
  update_ = std::make_unique<WeightUpdate>(*towers_, *calls_, buckets, placement, processes(),
                                           rank(), accumulate_, std::move(mirrored));
  exchange_ = std::make_unique<GradientExchange>(update_->destinations(), update_->sparse_rows(),
                                                 buckets.count, towers_->size(), accumulate_,
                                                 options_.exchange_dtype);
  build_losses();
}

TowerRun::~TowerRun() {
  // The towers' threads call into the exchange; the rest goes in reverse
  // order of declaration (the losses, the exchange, the update, the towers).
  if (towers_) towers_->stop_threads();
}

int TowerRun::towers() const {
  return static_cast<int>(towers_->size());
}

Graph& TowerRun::tower_graph(int i) {
  return *(*towers_)[static_cast<std::size_t>(i)].graph;
}

const EstimatorSpec& TowerRun::tower_spec(int i) const {
  return (*towers_)[static_cast<std::size_t>(i)].spec;
}

std::size_t TowerRun::tower_command_count(int i) const {
  const Towers::Tower& t = (*towers_)[static_cast<std::size_t>(i)];
  return t.executor ? t.executor->dispatch_count() : 0;
}

int TowerRun::buckets() const {
  return exchange_ ? exchange_->buckets() : 1;
}

bool TowerRun::overlaps_processes() const {
  return exchange_ && exchange_->overlaps_processes();
}

float TowerRun::local_loss() {
  // Training: the current step's micro-batches so far.
  if (losses_) return losses_->current();
  float total = 0;
  for (Towers::Tower& t : *towers_) total += t.executor->read(t.scaled_loss)[0];  // tower order
  return total;
}

std::vector<TowerRun::StepLoss> TowerRun::take_losses(std::size_t leave) {
  if (mode_ != Mode::Train) throw Error("take_losses: this model was built for another mode");
  std::vector<StepLoss> taken = losses_->take(leave);
  if (processes() > 1) {  // rank order
    for (StepLoss& l : taken) {
      distribution_.processes->allreduce_sum(std::span<float>(&l.loss, 1),
                                             fmt::format("step {}: the loss", l.step));
    }
  }
  return taken;
}

float TowerRun::loss() {
  float total = local_loss();
  if (processes() > 1) {  // rank order
    distribution_.processes->allreduce_sum(std::span<float>(&total, 1),
                                           fmt::format("step {}: the loss", global_step()));
  }
  return total;
}

Graph& TowerRun::variables_graph() const {
  Graph* master = update_ ? update_->master() : nullptr;
  return master != nullptr ? *master : *towers_->front().graph;
}

std::vector<float> TowerRun::variable(const std::string& name) {
  return variable_value(name).f32;
}

HostTensor TowerRun::variable_value(const std::string& name) {
  std::vector<Graph*> graphs = share_graphs();  // RoundRobin: the slots are only in the shares
  graphs.push_back(&variables_graph());
  for (Graph* g : graphs) {
    if (const std::optional<Tensor> var = g->find_variable(name)) {
      return HostTensor::floats(var->shape(), g->values(*var));
    }
  }
  std::set<std::string> names;
  for (const Graph* g : graphs) {
    for (const Variable& v : g->variables()) names.insert(v.tensor.name());
  }
  throw Error(
      fmt::format("the model has no variable '{}'; it has {}", name, fmt::join(names, ", ")));
}

std::vector<Graph*> TowerRun::share_graphs() const {
  return update_ ? update_->share_graphs() : std::vector<Graph*>{};
}

void TowerRun::save(const std::string& path) {
  if (!share_graphs().empty()) {  // RoundRobin: the masters and slots of every share, one file
    save_checkpoint(share_graphs(), global_step(), path, measured_weights_);
    return;
  }
  Graph* const graphs[] = {&variables_graph()};
  save_checkpoint(graphs, global_step(), path, measured_weights_);
}

void TowerRun::restore(const std::string& path) {
  if (processes() > 1) return restore_from_rank0(path);
  restore_local(path);
}

void TowerRun::restore_local(const std::string& path) {
  micro_ = 0;  // a step part-way through accumulation is dropped with the old variables
  if (losses_) losses_->reset();
  const CheckpointMatch match =
      mode_ == Mode::Train ? CheckpointMatch::Exact : CheckpointMatch::GraphSubset;
  // One read of the file, every graph checked before any changes: the
  // RoundRobin shares or the master, and every tower's copy, the frozen half
  // variables included (the weights' copy-back leaves them out).
  std::vector<Graph*> graphs = share_graphs();
  if (Graph* master = update_ ? update_->master() : nullptr) graphs.push_back(master);
  for (Towers::Tower& t : *towers_) graphs.push_back(t.graph.get());
  load_checkpoint(graphs, path, match);
  // The towers' copies as a step leaves them (trainable ones rounded where
  // they travel in half).
  if (update_) update_->send_weights();
}

std::uint64_t TowerRun::global_step() const {
  return variables_graph().global_step();
}

void TowerRun::assign(const std::string& name, std::span<const float> values) {
  std::vector<Graph*> graphs = share_graphs();
  if (update_ && update_->master()) graphs.push_back(update_->master());
  for (const Towers::Tower& t : *towers_) graphs.push_back(t.graph.get());
  std::vector<std::pair<Graph*, Tensor>> holders;
  for (Graph* g : graphs) {
    const std::optional<Tensor> var = g->find_variable(name);
    if (!var) continue;
    if (var->shape().elements() != static_cast<std::int64_t>(values.size())) {
      throw Error(fmt::format("assign: variable '{}' has shape {} ({} values) but {} were given",
                              name, var->shape().str(), var->shape().elements(), values.size()));
    }
    holders.emplace_back(g, *var);
  }
  if (holders.empty())
    throw Error(fmt::format("assign: the model has no variable named '{}'", name));
  for (auto& [g, var] : holders) g->assign(var, values);
}

}  // namespace vkt
