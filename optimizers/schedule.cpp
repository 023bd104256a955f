#include "schedule.h"

#include <fmt/format.h>

#include <cmath>

#include "../runtime/vulkan/error.h"

namespace vkt {

LearningRate::LearningRate(float rate)
    : LearningRate([rate](std::uint64_t) { return rate; }, fmt::format("{}", rate)) {}

LearningRate::LearningRate(std::function<float(std::uint64_t)> fn, std::string description)
    : fn_(std::move(fn)), description_(std::move(description)) {}

LearningRate LearningRate::step_decay(float rate, std::uint64_t step_size, float gamma) {
  if (step_size == 0) throw Error("step_decay: step_size must be at least 1");
  return LearningRate(
      [=](std::uint64_t step) {
        return static_cast<float>(
            rate * std::pow(static_cast<double>(gamma), static_cast<double>(step / step_size)));
      },
      fmt::format("step_decay({}, every {} steps x{})", rate, step_size, gamma));
}

LearningRate LearningRate::exponential_decay(float rate, std::uint64_t decay_steps,
                                             float decay_rate, bool staircase) {
  if (decay_steps == 0) throw Error("exponential_decay: decay_steps must be at least 1");
  return LearningRate(
      [=](std::uint64_t step) {
        double p = static_cast<double>(step) / static_cast<double>(decay_steps);
        if (staircase) p = std::floor(p);
        return static_cast<float>(rate * std::pow(static_cast<double>(decay_rate), p));
      },
      fmt::format("exponential_decay({}, {} per {} steps{})", rate, decay_rate, decay_steps,
                  staircase ? ", staircase" : ""));
}

LearningRate LearningRate::cosine_decay(float rate, std::uint64_t decay_steps, float alpha,
                                        std::uint64_t warmup_steps) {
  if (decay_steps == 0) throw Error("cosine_decay: decay_steps must be at least 1");
  return LearningRate(
      [=](std::uint64_t step) {
        if (step < warmup_steps) {
          return static_cast<float>(rate * static_cast<double>(step) /
                                    static_cast<double>(warmup_steps));
        }
        const double s = std::min<double>(static_cast<double>(step - warmup_steps),
                                          static_cast<double>(decay_steps));
        const double cosine = 0.5 * (1.0 + std::cos(M_PI * s / static_cast<double>(decay_steps)));
        return static_cast<float>(rate * (alpha + (1.0 - alpha) * cosine));
      },
      fmt::format("cosine_decay({}, {} steps, alpha {}, warm-up {})", rate, decay_steps, alpha,
                  warmup_steps));
}

}  // namespace vkt
