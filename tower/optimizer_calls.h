#pragma once
// How the towers record their TowerOptimizer calls (internal to tower/).

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "../optimizers/replication.h"

namespace vkt {

/// Every TowerOptimizer call of the towers, in call order: the optimizer that
/// applies it and each tower's gradients.
struct OptimizerCalls {
  struct Call {
    Optimizer* optimizer = nullptr;  // one of `optimizers`
    std::vector<std::vector<GradVar>> per_tower;
  };
  /// The towers' own copy of each TowerOptimizer's optimizer (tower 0's
  /// wrapper), by wrapper id: every call through one wrapper applies with one
  /// copy, so its calls share their slots as they do on one tower.
  std::map<std::uint64_t, std::unique_ptr<Optimizer>> optimizers;
  std::vector<Call> calls;
  /// Dynamic loss scaling of every tower's loss, and so of the summed gradients.
  std::optional<LossScaleOptions> loss_scaling;
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
  std::optional<LossScaleOptions> loss_scaling() const override { return calls_.loss_scaling; }
  int calls_made() const { return next_; }

  /// Tower 0 opens call k with the towers' copy of the wrapper's optimizer
  /// (made at the wrapper's first call); tower i > 0 must make the same
  /// call (optimizer name, variables) or this throws vkt::Error.
  Tensor record_call(std::uint64_t wrapper, const Optimizer& optimizer,
                     std::vector<GradVar> grads) override;

 private:
  int tower_, towers_;
  float scale_;
  OptimizerCalls& calls_;
  Graph& graph_;
  int next_ = 0;
};

}  // namespace vkt
