#include "tower_optimizer.h"

#include <atomic>

#include "../runtime/graph/ops/elementwise.h"
#include "../runtime/vulkan/error.h"
#include "loss_scaler.h"
#include "replication.h"

namespace vkt {
namespace {

/// A new wrapper id: never reused, so a wrapper made where a destroyed one was
/// is not taken for it.
std::uint64_t next_id() {
  static std::atomic<std::uint64_t> next{0};
  return next++;
}

}  // namespace

TowerOptimizer::TowerOptimizer(std::unique_ptr<Optimizer> optimizer)
    : optimizer_(std::move(optimizer)), id_(next_id()) {
  if (!optimizer_) throw Error("TowerOptimizer: the optimizer is null");
}

TowerOptimizer::TowerOptimizer(std::function<std::unique_ptr<Optimizer>()> make)
    : make_(std::move(make)), id_(next_id()) {
  if (!make_) throw Error("TowerOptimizer: the function that makes the optimizer is empty");
}

Optimizer& TowerOptimizer::optimizer() {
  if (!optimizer_) {
    if (!make_) throw Error("TowerOptimizer: this wrapper was moved from; use the one it moved to");
    std::unique_ptr<Optimizer> made = make_();
    if (!made) throw Error("TowerOptimizer: the function that makes the optimizer returned null");
    optimizer_ = std::move(made);
    make_ = nullptr;  // made once
  }
  return *optimizer_;
}

Tensor TowerOptimizer::minimize(const Tensor& loss, std::optional<std::vector<Tensor>> var_list) {
  return apply_gradients(compute_gradients(loss, std::move(var_list)));
}

std::vector<GradVar> TowerOptimizer::compute_gradients(
    const Tensor& loss, std::optional<std::vector<Tensor>> var_list) {
  const Replication* replication = loss.valid() ? replication_of(loss.graph()) : nullptr;
  // A replication is attached whenever gradients are combined (several towers
  // or processes, or accumulation), one tower included.
  Tensor scaled = loss;
  if (replication != nullptr && replication->loss_scale() != 1.0f) {
    // Each tower's share of the loss: the summed gradients are then the mean's.
    scaled = loss * replication->loss_scale();
  }
  if (replication != nullptr) {
    if (const auto options = replication->loss_scaling()) {
      // Times a power of two: every gradient exactly scaled until it overflows.
      scaled = LossScaler(loss.graph(), *options).scale(scaled);
    }
  }
  return optimizer().compute_gradients(scaled, std::move(var_list));
}

Tensor TowerOptimizer::apply_gradients(const std::vector<GradVar>& grads_and_vars) {
  Replication* replication =
      grads_and_vars.empty() ? nullptr : replication_of(grads_and_vars.front().var.graph());
  Tensor train;
  if (replication != nullptr) {
    train = replication->record_call(id_, optimizer(), grads_and_vars);
  } else {
    train = optimizer().apply_gradients(grads_and_vars);
  }
  ++apply_calls_;
  return train;
}

}  // namespace vkt
