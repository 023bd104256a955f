#pragma once
// The samples' training-rate hook, and their start-up time.

#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>

#include <vktower/tower/model_fn.h>

/// When static initialization reached this header: the fallback start.
inline const std::chrono::steady_clock::time_point kStaticInitTime =
    std::chrono::steady_clock::now();

/// Seconds since this process started by the kernel's account: its start
/// time (/proc/self/stat, in clock ticks since boot, usually 10 ms) against
/// CLOCK_BOOTTIME, so the dynamic loader and static initialization count too.
/// The tick truncates the start, so this reads up to one tick long. -1 where
/// /proc is not there.
inline double seconds_since_kernel_start() {
  std::ifstream in("/proc/self/stat");
  std::string stat;
  std::getline(in, stat);
  // Field 2, the command name, is in parentheses and may hold spaces: count
  // fields from the space after the last ')', which comes before field 3; the
  // start time is field 22.
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::size_t at = close + 1;
  for (int field = 3; field < 22 && at != std::string::npos; ++field) {
    at = stat.find(' ', at + 1);
  }
  if (at == std::string::npos) return -1;
  const double start_ticks = std::stod(stat.substr(at + 1));
  timespec now{};
  if (::clock_gettime(CLOCK_BOOTTIME, &now) != 0) return -1;
  const double now_s = static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
  return now_s - start_ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

/// Seconds since this process started: the kernel's account when it is at
/// most a second before static initialization (the dynamic loader's share),
/// else since static initialization. The kernel's start is the PID's: a
/// process that a script exec()s inherits the script's (scripts/demo.sh's
/// build counted, 149 s), and a virtual machine restored from a snapshot keeps
/// the start times of before (an NVIDIA H100 machine read -7e6 s).
inline double seconds_since_process_start() {
  const double since_init =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - kStaticInitTime).count();
  const double kernel = seconds_since_kernel_start();
  return kernel >= since_init && kernel <= since_init + 1.0 ? kernel : since_init;
}

/// Times the training steps themselves, after the first: begin() comes after
/// the model is built, but the first step still compiles (lavapipe) or
/// uploads what the rest reuse, so examples/s is the steady rate of the steps
/// after it; that step's time shows in first_step_s. The first begin() marks
/// the start-up's end (process start to the first training step).
class Throughput : public vkt::TrainingHook {
 public:
  using Clock = std::chrono::steady_clock;
  void begin() override {
    if (startup_s_ < 0) startup_s_ = seconds_since_process_start();
    start_ = Clock::now();
  }
  void after_step(std::uint64_t, float) override {
    if (first_step_s_ < 0) {
      first_step_s_ = seconds_since_process_start();
      first_step_seconds_ = seconds_since(start_);
      start_ = Clock::now();  // the steady rate starts here
      return;
    }
    ++steps_;
  }
  void end() override { seconds_ += seconds_since(start_); }
  /// Counts steps as they are reported, a step or two late, at the same pace.
  bool takes_late_losses() const override { return true; }
  /// Steps per second after the first (the first alone when it was the only one).
  double steps_per_s() const {
    if (steps_ > 0 && seconds_ > 0) return static_cast<double>(steps_) / seconds_;
    return first_step_seconds_ > 0 ? 1.0 / first_step_seconds_ : 0;
  }
  /// Seconds from process start to the first training step; -1 before it.
  double startup_s() const { return startup_s_; }
  /// Seconds from process start to the end of the first training step; -1 before it.
  double first_step_s() const { return first_step_s_; }

 private:
  static double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  }
  Clock::time_point start_;
  std::uint64_t steps_ = 0;
  double seconds_ = 0;
  double startup_s_ = -1;
  double first_step_s_ = -1;
  double first_step_seconds_ = -1;
};

/// The report's start-up line: `startup_s=S first_step_s=F`, process start to
/// the first step's start (shader pipelines built or, from the pipeline cache,
/// loaded) and to its end.
inline void print_startup(const Throughput& throughput) {
  fmt::print("startup_s={:.3f} first_step_s={:.3f}\n", throughput.startup_s(),
             throughput.first_step_s());
}
