#pragma once
// What the benchmark programs share: timing by the median of repetitions, and
// the process's CPU time (the figure another tenant's load disturbs least).

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace vkt::bench {

/// The median wall-clock time of `reps` calls of `fn`, in seconds, after one
/// untimed call (first touches of memory, pipeline creation).
template <typename Fn>
double median_seconds(int reps, Fn&& fn) {
  fn();
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    times.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

/// User + system CPU seconds of this process so far, every thread included
/// (lavapipe's too).
inline double process_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

}  // namespace vkt::bench
