#pragma once
// Learning-rate schedules: functions of the global step, evaluated in double on
// the host before each run and written (rounded to float) into the optimizer's
// parameter block, so the recorded step never changes.

#include <cstdint>
#include <functional>
#include <string>

namespace vkt {

/// A learning rate as a function of the global step (completed steps, from 0),
/// in double: optimizers derive their step's constants (Adam's lr / (1 -
/// beta1^t), Adagrad's decayed rate, ...) from it in double and round only the
/// result to float, as PyTorch computes them in Python floats. Rates and
/// factors are doubles for the same reason: 0.1f is 0.100000001490116.
///
///   auto lr = vkt::LearningRate::cosine_decay(0.1, 1000, 0.0, 100);  // 100 warm-up steps
///   vkt::Adam adam(lr);
class LearningRate {
 public:
  /// A constant rate (what a plain float converts to).
  LearningRate(double rate);  // NOLINT(google-explicit-constructor): 0.1 reads as a rate
  /// rate * gamma^floor(step / step_size)   (PyTorch StepLR)
  static LearningRate step_decay(double rate, std::uint64_t step_size, double gamma);
  /// rate * decay_rate^(step / decay_steps), the exponent floored when `staircase`
  /// (TensorFlow exponential_decay)
  static LearningRate exponential_decay(double rate, std::uint64_t decay_steps, double decay_rate,
                                        bool staircase = false);
  /// rate * step / warmup_steps during warm-up, then
  /// rate * (alpha + (1 - alpha) * 0.5 * (1 + cos(pi * min(s, decay_steps) / decay_steps)))
  /// with s = step - warmup_steps (TensorFlow cosine_decay after a linear warm-up)
  static LearningRate cosine_decay(double rate, std::uint64_t decay_steps, double alpha = 0.0,
                                   std::uint64_t warmup_steps = 0);

  /// The rate at `step`, in double (the shader gets it rounded to float).
  double at(std::uint64_t step) const { return fn_(step); }
  const std::string& description() const { return description_; }

 private:
  LearningRate(std::function<double(std::uint64_t)> fn, std::string description);
  std::function<double(std::uint64_t)> fn_;
  std::string description_;
};

}  // namespace vkt
