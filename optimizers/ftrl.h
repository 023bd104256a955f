#pragma once
// FTRL-Proximal, as TensorFlow's FtrlOptimizer defines it (wide/linear models).

#include "optimizer.h"

namespace vkt {

/// Hyperparameters are doubles (1 / lr and 2 * l2 are formed in double).
struct FtrlOptions {
  double learning_rate_power = -0.5;
  double initial_accumulator_value = 0.1;
  double l1 = 0.0;
  double l2 = 0.0;
  Clipping clipping{};
};

/// tf.train.FtrlOptimizer (McMahan et al., 2013), with k = -learning_rate_power:
///   accum_new = accum + g^2
///   linear = linear + g - (accum_new^k - accum^k) / lr * p
///   quadratic = accum_new^k / lr + 2 * l2
///   p = (sign(linear) * l1 - linear) / quadratic   if |linear| > l1, else 0
///   accum = accum_new
/// x^k is sqrt(x) for the default k = 0.5, as in TensorFlow (GLSL's pow is
/// exp2(k * log2(x)), less accurate).
/// Slots "accumulator" (starts at initial_accumulator_value) and "linear".
/// Sparse rows (see Optimizer): only named rows change, as tf
/// sparse_apply_ftrl.
class Ftrl : public Optimizer {
 public:
  explicit Ftrl(LearningRate lr, FtrlOptions options = {}, std::string name = "Ftrl");
  std::vector<std::string> slot_names() const override { return {"accumulator", "linear"}; }
  const char* shader() const override { return "opt_ftrl"; }
  std::function<StepValues(std::uint64_t)> step_values() const override;
  std::unique_ptr<Optimizer> clone() const override {
    return std::make_unique<Ftrl>(learning_rate(), options_, name());
  }
  float slot_initial_value(const std::string& slot) const override {
    return slot == "accumulator" ? static_cast<float>(options_.initial_accumulator_value) : 0.0f;
  }

 private:
  FtrlOptions options_;
};

}  // namespace vkt
