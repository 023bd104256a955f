#include "pipeline_builder.h"

#include <algorithm>

namespace vkt {

PipelineBuilder::PipelineBuilder(std::size_t max_threads)
    : max_threads_(max_threads > 0 ? max_threads
                                   : std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1,
                                                             kMaxThreads)) {}

PipelineBuilder::~PipelineBuilder() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

std::shared_future<void> PipelineBuilder::start(std::function<void()> build, std::size_t size) {
  std::packaged_task<void()> task(std::move(build));
  std::shared_future<void> done = task.get_future().share();
  {
    std::lock_guard lock(mutex_);
    // Arrival counts down, so that among equal sizes the earliest sorts first.
    const auto key = std::make_pair(size, UINT64_MAX - arrivals_++);
    queue_.emplace(key, std::move(task));
    if (threads_.size() < max_threads_) {
      try {
        threads_.emplace_back([this] { work(); });
      } catch (...) {
        // No thread could start: with none running, nobody would run the
        // build (whose owner is about to fail), so it leaves the queue.
        if (threads_.empty()) {
          queue_.erase(key);
          throw;
        }
      }
    }
  }
  wake_.notify_one();
  return done;
}

void PipelineBuilder::work() {
  for (;;) {
    std::packaged_task<void()> task;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to build
      task = std::move(queue_.begin()->second);
      queue_.erase(queue_.begin());
    }
    task();  // an exception lands in the task's future
  }
}

}  // namespace vkt
