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
  const auto in_unit = [](float b) { return b >= 0.0f && b < 1.0f; };
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
  return [lr = learning_rate(), o = options_, decoupled = decoupled_](std::uint64_t step) {
    // Bias corrections in double on the host: the shader gets them exact.
    const double t = static_cast<double>(step + 1);
    const float flags = static_cast<float>((o.amsgrad ? 1 : 0) | (decoupled ? 2 : 0));
    return StepValues{lr.at(step),
                      {o.beta1, o.beta2, o.eps, o.weight_decay,
                       static_cast<float>(1.0 - std::pow(static_cast<double>(o.beta1), t)),
                       static_cast<float>(1.0 - std::pow(static_cast<double>(o.beta2), t)), flags}};
  };
}

}  // namespace vkt
