#pragma once
// What a submit returns: a point on a queue's timeline to wait for.

#include <cstdint>
#include <span>

namespace vkt {

class Device;

/// The queue a Stream records for: compute (dispatches and copies) or the
/// device's dedicated transfer queue (copies only; compute where there is none).
enum class QueueKind { Compute, Transfer };

/// A submitted piece of work: done once the queue's timeline semaphore reaches
/// `value`. Cheap to copy; valid while its Device lives.
///
///   vkt::Ticket t = stream.submit();
///   ...  // host work overlaps the device's
///   t.wait();
struct Ticket {
  const Device* device = nullptr;
  QueueKind queue = QueueKind::Compute;
  std::uint64_t value = 0;
  /// Which of the device's compute queues (Device::compute_queues()); 0 for transfer.
  std::uint32_t lane = 0;

  /// Blocks until the work is done (returns at once for an empty ticket).
  void wait() const;
  /// True once the work is done, without blocking.
  bool done() const;
};

}  // namespace vkt
