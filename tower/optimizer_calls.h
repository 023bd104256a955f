#pragma once
// How the towers record their TowerOptimizer calls (internal to tower/).

#include <memory>
#include <vector>

#include "../optimizers/replication.h"

namespace vkt {

/// Every TowerOptimizer call of the towers, in call order: tower 0's
/// optimizer (the one that will apply) and each tower's gradients.
struct OptimizerCalls {
  struct Call {
    std::unique_ptr<Optimizer> owned;
    Optimizer* optimizer = nullptr;
    std::vector<std::vector<GradVar>> per_tower;
  };
  std::vector<Call> calls;
};

/// One tower's replication state, attached to its graph: TowerOptimizer calls
/// on the tower come here (see optimizers/replication.h).
class TowerReplication final : public Replication {
 public:
  TowerReplication(int tower, int towers, float scale, OptimizerCalls& calls, Graph& graph)
      : tower_(tower), towers_(towers), scale_(scale), calls_(calls), graph_(graph) {}
  int tower() const override { return tower_; }
  int towers() const override { return towers_; }
  float loss_scale() const override { return scale_; }
  int calls_made() const { return next_; }

  /// Tower 0 opens call k with its optimizer; tower i > 0 must make the same
  /// call (optimizer name, variables) or this throws vkt::Error.
  Tensor record_call(std::unique_ptr<Optimizer>& owner, Optimizer& used,
                     std::vector<GradVar> grads) override;

 private:
  int tower_, towers_;
  float scale_;
  OptimizerCalls& calls_;
  Graph& graph_;
  int next_ = 0;
};

}  // namespace vkt
