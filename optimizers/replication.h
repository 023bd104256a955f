#pragma once
// What TowerOptimizer needs to know when the graph it builds on is one tower
// of several (the towers attach it to each tower's graph; see tower/).

#include <cstdint>
#include <optional>
#include <vector>

#include "../runtime/graph/graph.h"
#include "loss_scaler.h"
#include "optimizer.h"

namespace vkt {

/// One tower's replication state, attached whenever the towers' gradients are
/// combined (several towers or processes, or gradient accumulation). A TowerOptimizer
/// call scales the loss by loss_scale(), takes the gradients, and hands them
/// here with its optimizer instead of adding an update to the tower's graph;
/// the towers apply each call once, on the summed gradients.
class Replication : public GraphAttachment {
 public:
  virtual int tower() const = 0;
  virtual int towers() const = 0;
  /// 1/N for Mean and SumByNonzeroWeights (N: every tower of every process),
  /// 1 for Sum; with k micro-batches per step, also 1/k.
  virtual float loss_scale() const = 0;
  /// Dynamic loss scaling of the towers' gradients: TowerOptimizer then also
  /// multiplies the loss by a LossScaler's scale (a variable of the tower's
  /// graph, which the consolidation device's update changes).
  virtual std::optional<LossScaleOptions> loss_scaling() const { return std::nullopt; }
  /// Records optimizer call number `call` of this tower, made through the
  /// TowerOptimizer whose id is `wrapper` with its `optimizer`; returns the
  /// train op to give the model function (a placeholder in the tower's graph).
  /// Tower 0: the towers make their own copy of `optimizer` (clone()) at a
  /// wrapper's first call, which applies every call of that wrapper. Later
  /// towers' calls must match tower 0's, or it throws vkt::Error.
  virtual Tensor record_call(std::uint64_t wrapper, const Optimizer& optimizer,
                             std::vector<GradVar> grads) = 0;
};

/// The replication state of `graph`, or null outside replicate_model_fn.
inline Replication* replication_of(const Graph& graph) {
  return dynamic_cast<Replication*>(graph.attachment());
}

}  // namespace vkt
