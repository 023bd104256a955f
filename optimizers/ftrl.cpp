#include "ftrl.h"

#include "../runtime/vulkan/error.h"

namespace vkt {

Ftrl::Ftrl(LearningRate lr, FtrlOptions options, std::string name)
    : Optimizer(std::move(name), std::move(lr), options.clipping), options_(options) {
  if (options_.learning_rate_power > 0 || options_.initial_accumulator_value <= 0 ||
      options_.l1 < 0 || options_.l2 < 0) {
    throw Error(
        "Ftrl: learning_rate_power must be <= 0, initial_accumulator_value positive, l1 "
        "and l2 not negative (as TensorFlow requires)");
  }
}

std::function<StepValues(std::uint64_t)> Ftrl::step_values() const {
  return [lr = learning_rate(), o = options_](std::uint64_t step) {
    return StepValues{lr.at(step), {o.learning_rate_power, o.l1, o.l2, 0, 0, 0, 0}};
  };
}

}  // namespace vkt
