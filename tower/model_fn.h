#pragma once
// The model-function interface: what a user writes for one device.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "../runtime/graph/graph.h"
#include "../runtime/graph/tensor.h"
#include "../runtime/io/host_tensor.h"
#include "metrics.h"

namespace vkt {

class Instance;
class TowerDevicePool;
class TowerRun;

enum class Mode { Train, Eval, Predict };

/// A model's hyperparameters: name -> value, copied per tower.
using ParamValue = std::variant<bool, std::int64_t, double, std::string>;
using Params = std::map<std::string, ParamValue>;

/// Features or labels: a name -> tensor map (one unnamed tensor is the entry
/// ""). at() of a key that is not there is a vkt::Error naming the keys that are.
///
///   const vkt::Tensor x = features.at("pixels");
class TensorDict : public std::map<std::string, Tensor> {
 public:
  using std::map<std::string, Tensor>::map;
  /// `kind` names the dict in errors ("features", "labels").
  explicit TensorDict(std::string kind) : kind_(std::move(kind)) {}
  const Tensor& at(const std::string& key) const;
  Tensor& at(const std::string& key);

 private:
  [[noreturn]] void missing(const std::string& key) const;
  std::string kind_ = "inputs";
};

/// An output of the model as served (tf.estimator.export): a prediction map,
/// a regression value or classification scores (and classes).
struct ExportOutput {
  enum class Kind { Predict, Regression, Classification };
  Kind kind = Kind::Predict;
  /// Predict: any names. Regression: "value". Classification: "scores" and/or "classes".
  std::map<std::string, Tensor> outputs{};
};

/// Called by whoever runs the training loop (the Estimator): before the first
/// step, after each step (with the new global step and the step's loss), and
/// at the end. A hook that wants training to end says so in should_stop();
/// one that finds it must not go on throws (vkt::Error).
class TrainingHook {
 public:
  virtual ~TrainingHook() = default;
  virtual void begin() {}
  virtual void after_step(std::uint64_t /*global_step*/, float /*loss*/) {}
  virtual bool should_stop() const { return false; }
  virtual void end() {}
  /// True when the hook may see each step's loss up to two steps late (after
  /// the next steps were queued on the devices), still every step, in order,
  /// and always before a checkpoint and at the end. When every hook says so,
  /// the Estimator never waits for a step to finish to hand its loss over: a
  /// step then costs the host one wait. A stop such a hook asks for takes
  /// effect after the steps already queued (at most two more).
  virtual bool takes_late_losses() const { return false; }
};

/// What a model function returns (tf.estimator.EstimatorSpec). With
/// replicate_model_fn, the merged spec also carries `run`, which trains,
/// evaluates or predicts with the towers together.
struct EstimatorSpec {
  Mode mode = Mode::Train;
  Tensor loss{};
  std::map<std::string, Tensor> predictions{};
  std::map<std::string, Metric> eval_metric_ops{};
  Tensor train_op{};
  std::map<std::string, ExportOutput> export_outputs{};
  std::vector<std::shared_ptr<TrainingHook>> training_hooks{};
  std::shared_ptr<TowerRun> run{};
};

/// The shape and type of one input of the global batch.
struct InputSpec {
  Shape shape;
  DType dtype = DType::F32;
};

class ProcessGroup;

/// How one process's towers take part in a larger step: the other processes
/// of the job, and the micro-batches whose gradients make one step.
struct Distribution {
  /// The job's processes (each with its own towers); null: this process alone.
  /// Not owned: it outlives the model (mpi_world() lives until exit).
  ProcessGroup* processes = nullptr;
  /// k micro-batches' gradients summed before one exchange and one update
  /// (PyTorch DDP's no_sync); the global step advances once per k.
  int accumulate_steps = 1;
  /// Positions in the replicated model's device list (ReplicateOptions::
  /// devices, or the default choice) of towers whose device was lost: left
  /// out, the others train the same global batch (the Estimator's
  /// RunConfig::on_device_loss = Continue).
  std::vector<int> lost_towers{};
  /// Shard weights measured earlier (ShardSplit::Measured; the newest
  /// checkpoint's): taken in place of measuring when there is one per tower.
  std::vector<double> measured_shard_weights{};
};

/// Where a model function builds. A root context (made by whoever runs the
/// model) names the devices to use and the global batch's inputs; a tower
/// context, which replicate_model_fn makes for each tower, gives the tower's
/// graph, on its own device.
class ModelContext {
 public:
  /// A root context: the instance, the global batch's feature and label specs,
  /// and the graphs' options (seed).
  ModelContext(Instance& instance, std::map<std::string, InputSpec> features,
               std::map<std::string, InputSpec> labels, GraphOptions graph_options = {});
  /// A tower context (made by replicate_model_fn).
  ModelContext(Graph& graph, int tower, int towers);

  bool is_tower() const { return graph_ != nullptr; }
  /// This tower's graph; vkt::Error on a root context.
  Graph& graph() const;
  int tower() const { return tower_; }
  int towers() const { return towers_; }
  /// f32 [tower batch]: 1 for a real example, 0 for padding. In Mode::Eval the
  /// Estimator pads a short last batch; pass these as a loss's weights (with a
  /// mean-like reduction) so the eval loss is the mean over real examples only.
  /// All ones in the other modes. vkt::Error on a root context.
  const Tensor& example_weights() const;
  /// Set by replicate_model_fn for each tower.
  void set_example_weights(Tensor weights) { example_weights_ = weights; }

  Instance& instance() const;
  const std::map<std::string, InputSpec>& feature_specs() const { return features_; }
  const std::map<std::string, InputSpec>& label_specs() const { return labels_; }
  const GraphOptions& graph_options() const { return graph_options_; }
  /// Root contexts: the processes and micro-batches a step spans (default: one
  /// process, one batch).
  const Distribution& distribution() const { return distribution_; }
  void set_distribution(const Distribution& distribution) { distribution_ = distribution; }
  /// Root contexts: where the towers' Devices come from (null, the default:
  /// each replicated model makes its own). Not owned; must outlive the models.
  TowerDevicePool* device_pool() const { return device_pool_; }
  void set_device_pool(TowerDevicePool* pool) { device_pool_ = pool; }

 private:
  Instance* instance_ = nullptr;
  Graph* graph_ = nullptr;
  int tower_ = 0;
  int towers_ = 1;
  Tensor example_weights_{};
  std::map<std::string, InputSpec> features_;
  std::map<std::string, InputSpec> labels_;
  GraphOptions graph_options_;
  Distribution distribution_{};
  TowerDevicePool* device_pool_ = nullptr;
};

/// A model function: builds the model for one device from the features and
/// labels (tensors of that device's graph) and returns its spec.
using ModelFn = std::function<EstimatorSpec(ModelContext&, const TensorDict& features,
                                            const TensorDict& labels, Mode, const Params&)>;

}  // namespace vkt
