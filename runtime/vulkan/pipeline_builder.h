#pragma once
// Builds compute pipelines on worker threads, so that a graph's kernels
// compile side by side while its step is recorded (a driver that compiles on
// the CPU, lavapipe, spends most of a program's start-up there).

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace vkt {

/// A small pool of threads that runs pipeline builds, the largest waiting one
/// first: a step's kernels are all asked for within the few milliseconds its
/// recording takes, and starting the long builds first keeps one of them from
/// running alone at the end. Threads start on the first build, one per
/// hardware thread (at most kMaxThreads); the destructor finishes every queued
/// build, then joins them. Owned by a Device and destroyed before its VkDevice.
class PipelineBuilder {
 public:
  static constexpr std::size_t kMaxThreads = 8;

  /// At most `max_threads` threads (0: one per hardware thread, at most kMaxThreads).
  explicit PipelineBuilder(std::size_t max_threads = 0);
  ~PipelineBuilder();
  PipelineBuilder(const PipelineBuilder&) = delete;
  PipelineBuilder& operator=(const PipelineBuilder&) = delete;

  /// Queues `build` of (estimated) size `size` (the shader's SPIR-V bytes); the
  /// future is ready when it has run, and holds what it threw.
  std::shared_future<void> start(std::function<void()> build, std::size_t size = 0);

 private:
  void work();

  std::mutex mutex_;
  std::condition_variable wake_;
  // By size, then arrival: the largest, earliest first.
  std::map<std::pair<std::size_t, std::uint64_t>, std::packaged_task<void()>, std::greater<>>
      queue_;
  std::uint64_t arrivals_ = 0;
  std::size_t max_threads_;
  std::vector<std::thread> threads_;
  bool stopping_ = false;
};

}  // namespace vkt
