#pragma once
// Builds compute pipelines on worker threads, so that a graph's kernels
// compile side by side while its step is recorded (a driver that compiles on
// the CPU, lavapipe, spends most of a program's start-up there).

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace vkt {

/// A small pool of threads that runs pipeline builds in the order they come.
/// Threads start on the first build, one per hardware thread (at most
/// kMaxThreads); the destructor finishes every queued build, then joins them.
/// Owned by a Device and destroyed before its VkDevice.
class PipelineBuilder {
 public:
  static constexpr std::size_t kMaxThreads = 8;

  PipelineBuilder() = default;
  ~PipelineBuilder();
  PipelineBuilder(const PipelineBuilder&) = delete;
  PipelineBuilder& operator=(const PipelineBuilder&) = delete;

  /// Queues `build`; the future is ready when it has run, and holds what it threw.
  std::shared_future<void> start(std::function<void()> build);

 private:
  void work();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::packaged_task<void()>> queue_;
  std::vector<std::thread> threads_;
  bool stopping_ = false;
};

}  // namespace vkt
