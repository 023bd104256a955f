#include "adagrad.h"

#include "../runtime/vulkan/error.h"

namespace vkt {

Adagrad::Adagrad(LearningRate lr, AdagradOptions options, std::string name)
    : Optimizer(std::move(name), std::move(lr), options.clipping), options_(options) {
  if (options_.lr_decay < 0 || options_.weight_decay < 0 ||
      options_.initial_accumulator_value < 0 || options_.eps <= 0) {
    throw Error(
        "Adagrad: lr_decay, weight_decay and initial_accumulator_value must not be "
        "negative, and eps must be positive");
  }
}

std::function<StepValues(std::uint64_t)> Adagrad::step_values() const {
  // H = (clr, eps, weight_decay), see shaders/opt_adagrad.glsl.
  return [lr = learning_rate(), o = options_](std::uint64_t step) {
    const auto f = [](double x) { return static_cast<float>(x); };
    const double rate = lr.at(step);
    const double clr = rate / (1.0 + static_cast<double>(step) * o.lr_decay);
    return StepValues{f(rate), {f(clr), f(o.eps), f(o.weight_decay)}};
  };
}

}  // namespace vkt
