#pragma once
// The samples' training-rate hook.

#include <chrono>
#include <cstdint>

#include <vktower/tower/model_fn.h>

/// Times the training steps themselves: begin() comes after the model is
/// built (shader pipelines, first uploads), so examples/s is the steady rate.
class Throughput : public vkt::TrainingHook {
 public:
  using Clock = std::chrono::steady_clock;
  void begin() override { start_ = Clock::now(); }
  void after_step(std::uint64_t, float) override { ++steps_; }
  void end() override { seconds_ = std::chrono::duration<double>(Clock::now() - start_).count(); }
  double steps_per_s() const { return seconds_ > 0 ? static_cast<double>(steps_) / seconds_ : 0; }

 private:
  Clock::time_point start_;
  std::uint64_t steps_ = 0;
  double seconds_ = 0;
};
