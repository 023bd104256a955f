#include "sgd.h"

#include <fmt/format.h>

#include "../runtime/vulkan/error.h"

namespace vkt {

SGD::SGD(LearningRate lr, SGDOptions options, std::string name)
    : Optimizer(std::move(name), std::move(lr), options.clipping), options_(options) {
  if (options_.nesterov && (options_.momentum <= 0 || options_.dampening != 0)) {
    throw Error("SGD: nesterov momentum needs momentum > 0 and dampening 0 (as in PyTorch)");
  }
  if (options_.momentum < 0 || options_.weight_decay < 0) {
    throw Error(fmt::format("SGD: momentum ({}) and weight_decay ({}) must not be negative",
                            options_.momentum, options_.weight_decay));
  }
}

std::function<StepValues(std::uint64_t)> SGD::step_values() const {
  // H = (momentum, 1 - dampening, nesterov, weight_decay, first step), see
  // shaders/opt_sgd.glsl.
  return [lr = learning_rate(), o = options_](std::uint64_t step) {
    const auto f = [](double x) { return static_cast<float>(x); };
    return StepValues{f(lr.at(step)),
                      {f(o.momentum), f(1.0 - o.dampening), o.nesterov ? 1.0f : 0.0f,
                       f(o.weight_decay), step == 0 ? 1.0f : 0.0f}};
  };
}

}  // namespace vkt
