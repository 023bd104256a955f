#pragma once
// One persistent host thread per tower.

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace vkt {

/// A host thread per tower, started once and reused for every step (a thread
/// per tower per step costs a thread start each time). run(fn) calls fn(i) on
/// tower i's thread for every tower and returns when all are done, rethrowing
/// the lowest tower's exception.
///
///   vkt::TowerThreads threads(n);
///   threads.run([&](int i) { feed_and_run(i); });
class TowerThreads {
 public:
  explicit TowerThreads(int towers);
  ~TowerThreads();
  TowerThreads(const TowerThreads&) = delete;
  TowerThreads& operator=(const TowerThreads&) = delete;

  void run(const std::function<void(int)>& fn);
  int size() const { return static_cast<int>(threads_.size()); }

 private:
  void loop(int tower);

  std::mutex mutex_;
  std::condition_variable work_;
  std::condition_variable done_;
  const std::function<void(int)>* fn_ = nullptr;
  std::uint64_t generation_ = 0;  // bumped per run()
  int running_ = 0;
  bool stop_ = false;
  std::vector<std::exception_ptr> errors_;
  std::vector<std::thread> threads_;
};

}  // namespace vkt
