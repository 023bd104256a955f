#pragma once
// Learning-rate schedules: functions of the global step, evaluated on the host
// before each run and written into the optimizer's parameter block, so the
// recorded step never changes.

#include <cstdint>
#include <functional>
#include <string>

namespace vkt {

/// A learning rate as a function of the global step (completed steps, from 0).
///
///   auto lr = vkt::LearningRate::cosine_decay(0.1f, 1000, 0.0f, 100);  // 100 warm-up steps
///   vkt::Adam adam(lr);
class LearningRate {
 public:
  /// A constant rate (what a plain float converts to).
  LearningRate(float rate);  // NOLINT(google-explicit-constructor): 0.1f reads as a rate
  /// rate * gamma^floor(step / step_size)   (PyTorch StepLR)
  static LearningRate step_decay(float rate, std::uint64_t step_size, float gamma);
  /// rate * decay_rate^(step / decay_steps), the exponent floored when `staircase`
  /// (TensorFlow exponential_decay)
  static LearningRate exponential_decay(float rate, std::uint64_t decay_steps, float decay_rate,
                                        bool staircase = false);
  /// rate * step / warmup_steps during warm-up, then
  /// rate * (alpha + (1 - alpha) * 0.5 * (1 + cos(pi * min(s, decay_steps) / decay_steps)))
  /// with s = step - warmup_steps (TensorFlow cosine_decay after a linear warm-up)
  static LearningRate cosine_decay(float rate, std::uint64_t decay_steps, float alpha = 0.0f,
                                   std::uint64_t warmup_steps = 0);

  float at(std::uint64_t step) const { return fn_(step); }
  const std::string& description() const { return description_; }

 private:
  LearningRate(std::function<float(std::uint64_t)> fn, std::string description);
  std::function<float(std::uint64_t)> fn_;
  std::string description_;
};

}  // namespace vkt
