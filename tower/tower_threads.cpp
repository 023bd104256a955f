#include "tower_threads.h"

namespace vkt {

TowerThreads::TowerThreads(int towers) : errors_(static_cast<std::size_t>(towers)) {
  for (int i = 0; i < towers; ++i) threads_.emplace_back([this, i] { loop(i); });
}

TowerThreads::~TowerThreads() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  work_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void TowerThreads::run(const std::function<void(int)>& fn) {
  {
    std::lock_guard lock(mutex_);
    fn_ = &fn;
    running_ = size();
    ++generation_;
    for (std::exception_ptr& e : errors_) e = nullptr;
  }
  work_.notify_all();
  {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return running_ == 0; });
    fn_ = nullptr;
  }
  for (const std::exception_ptr& e : errors_) {
    if (e) std::rethrow_exception(e);
  }
}

void TowerThreads::loop(int tower) {
  std::uint64_t seen = 0;
  for (;;) {
    const std::function<void(int)>* fn = nullptr;
    {
      std::unique_lock lock(mutex_);
      work_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      fn = fn_;
    }
    std::exception_ptr error;
    try {
      (*fn)(tower);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard lock(mutex_);
      errors_[static_cast<std::size_t>(tower)] = error;
      if (--running_ == 0) done_.notify_all();
    }
  }
}

}  // namespace vkt
