#include "adam.h"

#include <fmt/format.h>

#include <cmath>

#include "../runtime/vulkan/error.h"

namespace vkt {

Adam::Adam(LearningRate lr, AdamOptions options, std::string name)
    : Adam(std::move(lr), options, std::move(name), false) {}

Adam::Adam(LearningRate lr, AdamOptions options, std::string name, bool decoupled)
    : Optimizer(std::move(name), std::move(lr), options.clipping),
      options_(options),
      decoupled_(decoupled) {
  const auto in_unit = [](double b) { return b >= 0.0 && b < 1.0; };
  if (!in_unit(options_.beta1) || !in_unit(options_.beta2)) {
    throw Error(fmt::format("{}: betas must be in [0, 1), got ({}, {})", this->name(),
                            options_.beta1, options_.beta2));
  }
  if (options_.eps <= 0 || options_.weight_decay < 0) {
    throw Error(
        fmt::format("{}: eps must be positive and weight_decay not negative", this->name()));
  }
}

std::function<StepValues(std::uint64_t)> Adam::step_values() const {
  // H = (beta1, 1 - beta1, beta2, 1 - beta2, eps, L2 weight decay, decoupled
  // decay factor, step size, sqrt(1 - beta2^t), amsgrad), see
  // shaders/opt_adam.glsl: everything derived in double, as torch.optim.Adam
  // forms bias_correction1/2, step_size and bias_correction2_sqrt in Python
  // floats.
  return [lr = learning_rate(), o = options_, decoupled = decoupled_](std::uint64_t step) {
    const auto f = [](double x) { return static_cast<float>(x); };
    const double t = static_cast<double>(step + 1);
    const double rate = lr.at(step);
    const double bias1 = 1.0 - std::pow(o.beta1, t);
    const double bias2 = 1.0 - std::pow(o.beta2, t);
    return StepValues{
        f(rate),
        {f(o.beta1), f(1.0 - o.beta1), f(o.beta2), f(1.0 - o.beta2), f(o.eps),
         decoupled ? 0.0f : f(o.weight_decay), decoupled ? f(1.0 - rate * o.weight_decay) : 1.0f,
         f(rate / bias1), f(std::sqrt(bias2)), o.amsgrad ? 1.0f : 0.0f}};
  };
}

}  // namespace vkt
