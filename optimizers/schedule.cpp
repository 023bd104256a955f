#include "schedule.h"

#include <fmt/format.h>

#include <cmath>

#include "../runtime/vulkan/error.h"

namespace vkt {

LearningRate::LearningRate(double rate)
    : LearningRate([rate](std::uint64_t) { return rate; }, fmt::format("{}", rate)) {}

LearningRate::LearningRate(std::function<double(std::uint64_t)> fn, std::string description)
    : fn_(std::move(fn)), description_(std::move(description)) {}

LearningRate LearningRate::step_decay(double rate, std::uint64_t step_size, double gamma) {
  if (step_size == 0) throw Error("step_decay: step_size must be at least 1");
  return LearningRate(
      [=](std::uint64_t step) {
        return rate * std::pow(gamma, static_cast<double>(step / step_size));
      },
      fmt::format("step_decay({}, every {} steps x{})", rate, step_size, gamma));
}

LearningRate LearningRate::exponential_decay(double rate, std::uint64_t decay_steps,
                                             double decay_rate, bool staircase) {
  if (decay_steps == 0) throw Error("exponential_decay: decay_steps must be at least 1");
  return LearningRate(
      [=](std::uint64_t step) {
        double p = static_cast<double>(step) / static_cast<double>(decay_steps);
        if (staircase) p = std::floor(p);
        return rate * std::pow(decay_rate, p);
      },
      fmt::format("exponential_decay({}, {} per {} steps{})", rate, decay_rate, decay_steps,
                  staircase ? ", staircase" : ""));
}

LearningRate LearningRate::cosine_decay(double rate, std::uint64_t decay_steps, double alpha,
                                        std::uint64_t warmup_steps) {
  if (decay_steps == 0) throw Error("cosine_decay: decay_steps must be at least 1");
  return LearningRate(
      [=](std::uint64_t step) {
        if (step < warmup_steps) {
          return rate * static_cast<double>(step) / static_cast<double>(warmup_steps);
        }
        const double s = std::min<double>(static_cast<double>(step - warmup_steps),
                                          static_cast<double>(decay_steps));
        const double cosine = 0.5 * (1.0 + std::cos(M_PI * s / static_cast<double>(decay_steps)));
        return rate * (alpha + (1.0 - alpha) * cosine);
      },
      fmt::format("cosine_decay({}, {} steps, alpha {}, warm-up {})", rate, decay_steps, alpha,
                  warmup_steps));
}

}  // namespace vkt
