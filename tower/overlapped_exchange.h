#pragma once
// Each gradient bucket summed over the processes as soon as this process has it.

#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "../runtime/vulkan/ticket.h"

namespace vkt {

class ProcessExchange;

/// The cross-process half of PyTorch DDP's overlap: a thread of its own sums
/// part k of a ProcessExchange (bucket k of the gradients) over the processes
/// as soon as this process's sum of that bucket is submitted, while the
/// towers' backward passes go on. Parts go in index order on every rank, so
/// every rank makes the same collectives in the same order, and each element's
/// sum is the same bits as one exchange of everything after the step.
///
///   vkt::OverlappedExchange overlap(exchange);
///   overlap.begin("step 7");                 // before the towers run
///   overlap.summed(0, bucket0_ticket);       // from whichever thread summed it
///   std::vector<vkt::Ticket> done = overlap.finish();
class OverlappedExchange {
 public:
  /// Parts of `exchange` with no bytes are never waited for (a bucket of
  /// sparse gradients only, summed by no one).
  explicit OverlappedExchange(ProcessExchange& exchange);
  ~OverlappedExchange();
  OverlappedExchange(const OverlappedExchange&) = delete;
  OverlappedExchange& operator=(const OverlappedExchange&) = delete;

  /// A step's exchange starts: the parts summed() from now on are exchanged;
  /// `what` names the step in errors.
  void begin(std::string what);
  /// Part `part`'s local sum is submitted: written once `ready` completes.
  /// Ignored outside a step (between finish() and begin()).
  void summed(std::size_t part, const Ticket& ready);
  /// Waits until every part is exchanged; per part, the ticket after which it
  /// holds the sum over the processes (empty where the host wrote it).
  /// Rethrows what the exchange threw.
  std::vector<Ticket> finish();
  /// A step that failed part-way: waits for what is under way and forgets the rest.
  void abandon();
  /// True between begin() and finish() or abandon().
  bool active() const;

 private:
  void loop();

  ProcessExchange& exchange_;
  std::vector<bool> empty_;  // per part: nothing to sum
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::string what_;
  bool active_ = false, abandoned_ = false, stopping_ = false, done_ = true;
  std::vector<std::optional<Ticket>> ready_;  // per part, this step
  std::vector<Ticket> exchanged_;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace vkt
