#include "tower_optimizer.h"

#include "../runtime/vulkan/error.h"

namespace vkt {

TowerOptimizer::TowerOptimizer(std::unique_ptr<Optimizer> optimizer)
    : optimizer_(std::move(optimizer)) {
  if (!optimizer_) throw Error("TowerOptimizer: the optimizer is null");
}

TowerOptimizer::TowerOptimizer(std::function<std::unique_ptr<Optimizer>()> make)
    : make_(std::move(make)) {
  if (!make_) throw Error("TowerOptimizer: the function that makes the optimizer is empty");
}

Optimizer& TowerOptimizer::optimizer() {
  if (!optimizer_) {
    optimizer_ = make_();
    if (!optimizer_)
      throw Error("TowerOptimizer: the function that makes the optimizer returned null");
    make_ = nullptr;  // made once
  }
  return *optimizer_;
}

Tensor TowerOptimizer::minimize(const Tensor& loss, std::optional<std::vector<Tensor>> var_list) {
  return apply_gradients(compute_gradients(loss, std::move(var_list)));
}

std::vector<GradVar> TowerOptimizer::compute_gradients(
    const Tensor& loss, std::optional<std::vector<Tensor>> var_list) {
  return optimizer().compute_gradients(loss, std::move(var_list));
}

Tensor TowerOptimizer::apply_gradients(const std::vector<GradVar>& grads_and_vars) {
  Tensor train = optimizer().apply_gradients(grads_and_vars);
  ++apply_calls_;
  return train;
}

}  // namespace vkt
