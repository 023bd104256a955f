#include "hooks.h"

#include <fmt/format.h>

#include <cmath>

#include "../runtime/vulkan/detail/log.h"
#include "../runtime/vulkan/error.h"

namespace vkt {

LoggingHook::LoggingHook(std::uint64_t every_steps, std::int64_t batch_size,
                         std::function<void(const StepRate&)> sink)
    : every_(every_steps), batch_size_(batch_size), sink_(std::move(sink)) {
  if (every_ == 0) throw Error("LoggingHook: log every 1 or more steps");
}

void LoggingHook::begin() {
  since_ = std::chrono::steady_clock::now();
  steps_since_ = 0;
}

void LoggingHook::after_step(std::uint64_t global_step, float loss) {
  ++steps_since_;
  if (global_step % every_ != 0) return;
  const auto now = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(now - since_).count();
  const double steps_per_s = seconds > 0 ? static_cast<double>(steps_since_) / seconds : 0.0;
  sink_({global_step, loss, steps_per_s * static_cast<double>(batch_size_), steps_per_s});
  since_ = now;
  steps_since_ = 0;
}

void NanLossHook::after_step(std::uint64_t global_step, float loss) {
  if (std::isfinite(loss)) {
    in_a_row_ = 0;
    return;
  }
  if (skips_allowed_ > 0) {
    if (++in_a_row_ <= skips_allowed_) {
      detail::log().warn(
          "the loss is {} at global step {}: its update was skipped (dynamic loss "
          "scaling), the loss scale halved",
          loss, global_step);
      return;
    }
    throw Error(fmt::format(
        "the loss is {} at global step {}, {} steps in a row with an inf or NaN loss: each "
        "update was skipped (dynamic loss scaling), but the model does not recover. Lower the "
        "learning rate, train in bf16 or fp32 (--precision), or check the input for NaN or "
        "infinite values",
        loss, global_step, in_a_row_));
  }
  throw Error(fmt::format(
      "the loss is {} at global step {}: training stopped (no checkpoint was written for this "
      "step). Lower the learning rate, clip the gradients, or check the input for NaN or "
      "infinite values",
      loss, global_step));
}

}  // namespace vkt
