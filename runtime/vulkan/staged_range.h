#pragma once
// The host side of a device range: its own bytes where mapped, else staging and a recorded copy.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "buffer.h"
#include "stream.h"
#include "ticket.h"

namespace vkt {

/// The one staged path between host memory and a buffer range that a step
/// uses again and again: the feeds, the replica sums, the losses, the
/// exchange between processes and the copies between devices all go through
/// it. Where the range's buffer is mapped (lavapipe, integrated GPUs) host()
/// is the range's own bytes and there is nothing to copy; elsewhere (a
/// discrete GPU's storage, VKT_FORCE_STAGING=1) host() is host-visible memory
/// and the copy between it and the range is recorded once and submitted
/// whenever asked, or recorded into a stream of the caller's.
///
///   vkt::StagedRange down(gradients, vkt::StagedRange::Direction::ToHost);
///   down.submit({&backward_done, 1}).wait();   // host() holds the gradients
///   vkt::StagedRange up(weights, vkt::StagedRange::Direction::ToDevice);
///   std::memcpy(up.host().data(), values, bytes);
///   vkt::Ticket arrived = up.submit();
class StagedRange {
 public:
  enum class Direction { ToHost, ToDevice };
  /// How to stage.
  struct Options {
    QueueKind queue = QueueKind::Transfer;  ///< where the copy runs
    std::uint32_t lane = 0;                 ///< which queue of that kind
    /// Host-visible memory of the range's Device to stage through, of the
    /// range's size (a ring slot, one chunk's share of a reused buffer);
    /// none: a staging buffer of its own.
    std::optional<BufferRange> through{};
    /// Stage even where the range is mapped: the host reads a copy taken at a
    /// point of the device's work (a loss in a ring, a second feed buffer).
    bool even_if_mapped = false;
    /// False: the copy is only ever recorded into a caller's stream
    /// (record_into()), so it gets no stream of its own and submit() throws.
    bool submits = true;
  };
  StagedRange() = default;
  /// vkt::Error where `through` is not host-visible, not of the range's size
  /// or on another Device.
  StagedRange(BufferRange range, Direction direction, const Options& options);
  StagedRange(BufferRange range, Direction direction) : StagedRange(range, direction, Options{}) {}

  /// The bytes the host reads (ToHost, once submit()'s ticket completes) or
  /// writes (ToDevice, before submit()).
  std::span<std::byte> host() const;
  /// True when the bytes pass through staging (a copy runs on the device).
  bool staged() const { return staged_; }
  /// Submits the copy after `after` (tickets of the range's Device) and returns
  /// the ticket after which the other side holds the bytes. Nothing staged: an
  /// empty ticket; ToHost first waits on the host for `after`.
  Ticket submit(std::span<const Ticket> after = {});
  /// Records the copy into `stream` instead (the caller submits it with its
  /// own work); nothing where nothing is staged.
  void record_into(Stream& stream) const;
  const BufferRange& range() const { return range_; }

 private:
  BufferRange range_;
  Direction direction_ = Direction::ToHost;
  BufferRange host_;
  bool staged_ = false;
  // The staging buffer, when no `through` was given (host_ points at it: a
  // move keeps its address).
  std::unique_ptr<Buffer> own_;
  std::optional<Stream> copy_;  // between host_ and range_, when staged and submitted
};

}  // namespace vkt
