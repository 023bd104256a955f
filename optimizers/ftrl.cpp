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
  // H = (k = -learning_rate_power, l1, 2 * l2, 1 / lr, k == 0.5), see
  // shaders/opt_ftrl.glsl.
  return [lr = learning_rate(), o = options_](std::uint64_t step) {
    const auto f = [](double x) { return static_cast<float>(x); };
    const double rate = lr.at(step);
    return StepValues{f(rate),
                      {f(-o.learning_rate_power), f(o.l1), f(2.0 * o.l2), f(1.0 / rate),
                       o.learning_rate_power == -0.5 ? 1.0f : 0.0f}};
  };
}

}  // namespace vkt
