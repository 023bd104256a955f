#pragma once
// The optimizer base: gradients, slots, and one update shader per call.

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../runtime/graph/op.h"
#include "../runtime/graph/tensor.h"
#include "schedule.h"

namespace vkt {

class Graph;

/// A variable and its gradient, as compute_gradients returns them.
struct GradVar {
  Gradient grad;
  Tensor var;
};

/// Gradient clipping applied by an optimizer call before its update.
struct Clipping {
  /// Clip each gradient element to [-value, value] (0 = off).
  float value = 0.0f;
  /// Scale all of the call's gradients by clip / max(global_norm, clip), where
  /// global_norm = sqrt(sum of every squared gradient element), computed on the
  /// device (tf.clip_by_global_norm; 0 = off). Applied before `value`.
  float global_norm = 0.0f;
};

/// The learning rate and up to eleven values of one step, as the update shader
/// reads them. Every value derived from the hyperparameters (1 - beta, bias
/// corrections, a scheduled or decayed rate, ...) is formed in double on the
/// host and only then rounded to float: formed in float, 1 - 0.999f is
/// 0.00099998713 (1.3e-5 off 0.001), which RMSprop's steps carry straight
/// into the weights.
struct StepValues {
  float lr = 0.0f;
  std::array<float, 11> h{};
};

/// Base of SGD, Adam, ... Each minimize()/apply_gradients() call adds one update
/// op (an "apply step") to the loss's graph: a single dispatch of the
/// optimizer's shader over all the call's variables, their gradients and their
/// slots, which all live in the graph's variable and gradient arenas. Apply
/// steps run after every other op of a training step, in the order they were
/// made; the graph's global step advances once per step after the last one.
/// Slots are non-trainable variables named "<variable>/<optimizer name>/<slot>".
///
/// Sparse gradients (an embedding's rows: values [k, D...] at rows indices [k])
/// update lazily, as PyTorch's SparseAdam and TensorFlow's sparse applies (and
/// LazyAdam) do: only the rows named in indices change, parameters and slots.
/// Duplicate indices are summed first (in occurrence order); the optimizer's
/// dense formula is then applied once to each named row with that sum as its
/// gradient. Rows not named are not touched at all: their slots do not decay
/// (Adam's m and v, RMSprop's averages), and weight decay does not shrink them.
/// Step-dependent values (t, bias corrections, the learning-rate schedule,
/// SGD's first-step momentum start) are the global step's, as in the dense
/// update, so a row first named at step t gets Adam's bias corrections of step t
/// with m and v starting from zero. Indices outside [0, rows) are skipped (the
/// embedding lookup gave zeros for them). Clipping: the global norm covers the
/// call's dense gradients and the sparse values as given (duplicates not
/// summed, as tf.clip_by_global_norm on IndexedSlices); clipping by value clamps
/// each element of a row's summed gradient. The sparse variables of a call get
/// their own dispatch, after the dense one, still behind one train op. It is
/// deterministic without float atomics and costs O(k^2 * ceil(D / 64)) index
/// comparisons per variable (each (occurrence, 64 columns) work item scans the
/// indices for duplicates; ceil(D / 16) for widths not a multiple of 4) plus
/// one read of the values, independent of the table's row count. Quadratic in
/// k: on lavapipe, Adam on a [10000, 64] table takes about 1 ms more per step
/// than the forward pass at k = 1024 ids and 25 ms at k = 4096.
///
///   vkt::Adam adam(0.001f);
///   vkt::Tensor train_op = adam.minimize(loss);
///   vkt::Executor step(graph, {loss, train_op});
///   step.run();   // forward, backward and the Adam update, one submit
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  const std::string& name() const { return name_; }
  const LearningRate& learning_rate() const { return lr_; }
  const Clipping& clipping() const { return clipping_; }

  /// compute_gradients then apply_gradients: returns the train op, whose value
  /// after a run is the learning rate that step used. `var_list` defaults to
  /// every trainable variable of the loss's graph; an empty list is an error.
  Tensor minimize(const Tensor& loss, std::optional<std::vector<Tensor>> var_list = std::nullopt);
  /// Gradients of `loss` for `var_list` (default: all trainable). Variables the
  /// loss does not reach are left out, with a warning.
  std::vector<GradVar> compute_gradients(
      const Tensor& loss, std::optional<std::vector<Tensor>> var_list = std::nullopt);
  /// Adds the apply step for these gradients (making the slots on first use).
  Tensor apply_gradients(const std::vector<GradVar>& grads_and_vars);

  /// The slot `slot` of `var` (e.g. Adam's "m"); vkt::Error if there is none.
  Tensor get_slot(const Tensor& var, const std::string& slot) const;
  /// This optimizer's slot names, e.g. {"m", "v"}.
  virtual std::vector<std::string> slot_names() const = 0;
  /// Every slot variable this optimizer has made.
  std::vector<Tensor> variables() const;

  /// The update shader's name (shaders/<name>.comp).
  virtual const char* shader() const = 0;
  /// A function from the global step (completed steps) to the values the shader
  /// reads at that step (see StepValues). Captures values, not the optimizer,
  /// so the graph never points back at it.
  virtual std::function<StepValues(std::uint64_t)> step_values() const = 0;
  virtual float slot_initial_value(const std::string& /*slot*/) const { return 0.0f; }
  /// A new optimizer of the same kind, name and settings, with no slots yet:
  /// the towers' own copy of a TowerOptimizer's optimizer (tower/).
  virtual std::unique_ptr<Optimizer> clone() const = 0;

 protected:
  Optimizer(std::string name, LearningRate lr, Clipping clipping);

 private:
  friend class LossScaler;
  /// apply_gradients; with a loss `scale` (a LossScaler's variable), the update
  /// first checks the call's gradients for inf and NaN (after `check`, the
  /// step's earlier check, when valid), then unscales them or skips; `check`
  /// becomes this call's.
  Tensor apply(const std::vector<GradVar>& grads_and_vars, const Tensor& scale, Tensor& check);
  /// The slots of `var`, made (zero or slot_initial_value) on first use.
  std::vector<Tensor> slots_for(Graph& g, const Tensor& var);

  std::string name_;
  LearningRate lr_;
  Clipping clipping_;
  std::map<std::pair<const Graph*, int>, std::vector<Tensor>> slots_;  // by variable
};

}  // namespace vkt
