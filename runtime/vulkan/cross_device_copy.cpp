#include "cross_device_copy.h"

#include <fmt/format.h>

#include <cstring>

#include "error.h"

namespace vkt {
namespace {

void check(const BufferRange& r, const char* side) {
  if (r.buffer == nullptr || !*r.buffer) {
    throw Error(fmt::format("cross-device copy: the {} buffer is empty (moved-from?)", side));
  }
  if (r.offset > r.buffer->size() ||
      (r.bytes != BufferRange::kWhole && r.bytes > r.buffer->size() - r.offset)) {
    throw Error(
        fmt::format("cross-device copy: the {} range ({} bytes at offset {}) lies outside "
                    "its buffer of {} bytes",
                    side, r.bytes, r.offset, r.buffer->size()));
  }
}

}  // namespace

CrossDeviceCopy::CrossDeviceCopy(BufferRange src, BufferRange dst) : src_(src), dst_(dst) {
  check(src_, "source");
  check(dst_, "destination");
  if (src_.size() != dst_.size()) {
    throw Error(
        fmt::format("cross-device copy: the source holds {} bytes but the destination {}; "
                    "give ranges of the same size",
                    src_.size(), dst_.size()));
  }
  Device& from = src_.buffer->device();
  Device& to = dst_.buffer->device();
  if (!src_.buffer->mapped()) {
    src_staging_ = Buffer(from, src_.size(), BufferKind::Staging);
    download_.emplace(from, QueueKind::Transfer);
    download_->copy(src_, src_staging_);
  }
  if (!dst_.buffer->mapped()) {
    dst_staging_ = Buffer(to, dst_.size(), BufferKind::Staging);
    upload_.emplace(to, QueueKind::Transfer);
    upload_->copy(dst_staging_, dst_);
  }
}

void CrossDeviceCopy::run(std::span<const Ticket> src_ready) {
  const std::byte* from = nullptr;
  if (download_) {
    download_->submit(src_ready).wait();
    from = src_staging_.host().data();
  } else {
    for (const Ticket& t : src_ready) t.wait();
    from = src_.buffer->host().data() + src_.offset;
  }
  std::byte* into = upload_ ? dst_staging_.host().data()
                            : const_cast<Buffer*>(dst_.buffer)->host().data() + dst_.offset;
  std::memcpy(into, from, src_.size());
  if (upload_) upload_->submit().wait();
}

void copy_across(BufferRange src, BufferRange dst, std::span<const Ticket> src_ready) {
  CrossDeviceCopy(src, dst).run(src_ready);
}

}  // namespace vkt
