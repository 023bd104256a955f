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
  return [lr = learning_rate(), o = options_](std::uint64_t step) {
    return StepValues{lr.at(step),
                      {o.lr_decay, o.eps, o.weight_decay, static_cast<float>(step + 1), 0, 0, 0}};
  };
}

}  // namespace vkt
