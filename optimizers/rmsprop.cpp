#include "rmsprop.h"

#include "../runtime/vulkan/error.h"

namespace vkt {

RMSprop::RMSprop(LearningRate lr, RMSpropOptions options, std::string name)
    : Optimizer(std::move(name), std::move(lr), options.clipping), options_(options) {
  if (options_.alpha < 0 || options_.alpha >= 1 || options_.eps <= 0 || options_.momentum < 0 ||
      options_.weight_decay < 0) {
    throw Error(
        "RMSprop: alpha must be in [0, 1), eps positive, momentum and weight_decay not "
        "negative");
  }
}

std::function<StepValues(std::uint64_t)> RMSprop::step_values() const {
  // H = (alpha, 1 - alpha, eps, weight_decay, momentum, centered), see
  // shaders/opt_rmsprop.glsl.
  return [lr = learning_rate(), o = options_](std::uint64_t step) {
    const auto f = [](double x) { return static_cast<float>(x); };
    return StepValues{f(lr.at(step)),
                      {f(o.alpha), f(1.0 - o.alpha), f(o.eps), f(o.weight_decay), f(o.momentum),
                       o.centered ? 1.0f : 0.0f}};
  };
}

}  // namespace vkt
