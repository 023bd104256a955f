#include "overlapped_exchange.h"

#include "process_exchange.h"

namespace vkt {

OverlappedExchange::OverlappedExchange(ProcessExchange& exchange)
    : exchange_(exchange), ready_(exchange.summed_parts()), exchanged_(exchange.summed_parts()) {
  for (std::size_t k = 0; k < exchange.summed_parts(); ++k) {
    empty_.push_back(exchange.part_bytes(k) == 0);
  }
  thread_ = std::thread([this] { loop(); });
}

OverlappedExchange::~OverlappedExchange() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    abandoned_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void OverlappedExchange::begin(std::string what) {
  std::unique_lock lock(mutex_);
  wake_.wait(lock, [&] { return done_; });
  what_ = std::move(what);
  for (std::size_t k = 0; k < ready_.size(); ++k) {
    ready_[k] = empty_[k] ? std::optional<Ticket>(Ticket{}) : std::nullopt;
  }
  error_ = nullptr;
  abandoned_ = false;
  done_ = false;
  active_ = true;
  wake_.notify_all();
}

void OverlappedExchange::summed(std::size_t part, const Ticket& ready) {
  {
    std::lock_guard lock(mutex_);
    if (!active_ || part >= ready_.size()) return;
    ready_[part] = ready;
  }
  wake_.notify_all();
}

bool OverlappedExchange::active() const {
  std::lock_guard lock(mutex_);
  return active_;
}

std::vector<Ticket> OverlappedExchange::finish() {
  std::unique_lock lock(mutex_);
  wake_.wait(lock, [&] { return done_; });
  active_ = false;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  return exchanged_;
}

void OverlappedExchange::abandon() {
  std::unique_lock lock(mutex_);
  if (!active_) return;
  abandoned_ = true;
  wake_.notify_all();
  wake_.wait(lock, [&] { return done_; });
  active_ = false;
  error_ = nullptr;
}

void OverlappedExchange::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !done_; });
    if (stopping_) return;
    for (std::size_t k = 0; k < ready_.size(); ++k) {
      wake_.wait(lock, [&] { return abandoned_ || ready_[k].has_value(); });
      if (abandoned_) break;
      const Ticket ready = *ready_[k];
      const std::string what = what_;
      lock.unlock();
      try {
        const Ticket done = exchange_.sum(k, {&ready, 1}, what);
        lock.lock();
        exchanged_[k] = done;
      } catch (...) {
        lock.lock();
        error_ = std::current_exception();
        break;
      }
    }
    done_ = true;
    wake_.notify_all();
  }
}

}  // namespace vkt
