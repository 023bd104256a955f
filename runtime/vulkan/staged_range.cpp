#include "staged_range.h"

#include <fmt/format.h>

#include "device.h"
#include "error.h"

namespace vkt {

StagedRange::StagedRange(BufferRange range, Direction direction, const Options& options)
    : range_(range), direction_(direction) {
  if (range_.buffer == nullptr || !*range_.buffer) {
    throw Error("staged range: the buffer is empty (moved-from?)");
  }
  Device& device = range_.buffer->device();
  if (range_.buffer->mapped() && !options.even_if_mapped) {
    host_ = range_;
    return;
  }
  if (options.through) {
    const BufferRange& through = *options.through;
    if (through.buffer == nullptr || !through.buffer->mapped() ||
        &through.buffer->device() != &device || through.size() != range_.size()) {
      throw Error(fmt::format(
          "internal: a staged range of {} bytes goes through {} bytes of memory that is not "
          "host-visible memory of its Device",
          range_.size(), through.buffer == nullptr ? 0 : through.size()));
    }
    host_ = through;
  } else {
    own_ = std::make_unique<Buffer>(device, range_.size(), BufferKind::Staging);
    host_ = BufferRange(*own_);
  }
  staged_ = true;
  if (options.submits) {
    copy_.emplace(device, options.queue, options.lane);
    record_into(*copy_);
  }
}

std::span<std::byte> StagedRange::host() const {
  return const_cast<Buffer*>(host_.buffer)->host().subspan(host_.offset, host_.size());
}

Ticket StagedRange::submit(std::span<const Ticket> after) {
  if (staged_) {
    if (!copy_)
      throw Error("internal: a staged range recorded into a caller's stream is submitted");
    return copy_->submit(after);
  }
  if (direction_ == Direction::ToHost) {
    for (const Ticket& t : after) t.wait();
  }
  return Ticket{};
}

void StagedRange::record_into(Stream& stream) const {
  if (!staged_) return;
  if (direction_ == Direction::ToHost) {
    stream.copy(range_, host_);
  } else {
    stream.copy(host_, range_);
  }
}

}  // namespace vkt
