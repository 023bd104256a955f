#pragma once
// The training hooks an Estimator adds itself, and the one a user adds to stop.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "model_fn.h"

namespace vkt {

/// What the logging hook reports every period.
struct StepRate {
  std::uint64_t step = 0;
  float loss = 0;
  double examples_per_s = 0;
  double steps_per_s = 0;
};

/// Every `every_steps` global steps: the step, the loss, and examples/s and
/// steps/s over the steps since the last report, handed to `sink` (the
/// Estimator's: a log line, or the progress bar and metrics.csv).
class LoggingHook : public TrainingHook {
 public:
  LoggingHook(std::uint64_t every_steps, std::int64_t batch_size,
              std::function<void(const StepRate&)> sink);
  void begin() override;
  void after_step(std::uint64_t global_step, float loss) override;
  bool takes_late_losses() const override { return true; }

 private:
  std::uint64_t every_;
  std::int64_t batch_size_;
  std::function<void(const StepRate&)> sink_;
  std::chrono::steady_clock::time_point since_;
  std::uint64_t steps_since_ = 0;
};

/// Asks training to stop once the global step reaches `last_step`
/// (tf.estimator.StopAtStepHook).
class StopAtStepHook : public TrainingHook {
 public:
  explicit StopAtStepHook(std::uint64_t last_step) : last_step_(last_step) {}
  void after_step(std::uint64_t global_step, float) override { step_ = global_step; }
  bool should_stop() const override { return step_ >= last_step_; }

 private:
  std::uint64_t last_step_;
  std::uint64_t step_ = 0;
};

/// Throws vkt::Error naming the step when the loss is NaN or infinite: the
/// weights are lost by then, and a checkpoint of them would only overwrite a
/// good one. Under dynamic loss scaling such a step changed nothing (its
/// update was skipped, as any step with an inf or NaN gradient is): the hook
/// logs it and throws only after more than `skips_allowed` such steps in a
/// row, when halving the scale is clearly not what the run needs.
class NanLossHook : public TrainingHook {
 public:
  explicit NanLossHook(std::uint32_t skips_allowed = 0) : skips_allowed_(skips_allowed) {}
  void after_step(std::uint64_t global_step, float loss) override;
  bool takes_late_losses() const override { return true; }

 private:
  std::uint32_t skips_allowed_;
  std::uint32_t in_a_row_ = 0;
};

}  // namespace vkt
