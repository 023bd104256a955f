#pragma once
// What the benchmark programs share: timing by the median of repetitions.

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

}  // namespace vkt::bench
