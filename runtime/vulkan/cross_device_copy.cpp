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

CrossDeviceCopy::CrossDeviceCopy(BufferRange src, BufferRange dst)
    : CrossDeviceCopy(src, std::vector<BufferRange>{dst}) {}

CrossDeviceCopy::CrossDeviceCopy(BufferRange src, std::vector<BufferRange> dsts)
    : src_(src), dsts_(std::move(dsts)) {
  check(src_, "source");
  if (dsts_.empty()) throw Error("cross-device copy: no destination given");
  for (std::size_t i = 0; i < dsts_.size(); ++i) {
    check(dsts_[i], "destination");
    if (src_.size() != dsts_[i].size()) {
      throw Error(fmt::format(
          "cross-device copy: the source holds {} bytes but the destination{} {}; give ranges "
          "of the same size",
          src_.size(), dsts_.size() == 1 ? "" : fmt::format(" {}", i), dsts_[i].size()));
    }
  }
  Device& from = src_.buffer->device();
  for (std::size_t i = 0; i < dsts_.size(); ++i) {
    if (&dsts_[i].buffer->device() == &from) {
      if (!local_copy_) local_copy_.emplace(from, QueueKind::Transfer);
      local_copy_->copy(src_, dsts_[i]);
      local_.push_back(i);
      continue;
    }
    Remote remote{dsts_[i], {}, {}};
    if (!dsts_[i].buffer->mapped()) {
      Device& to = dsts_[i].buffer->device();
      remote.staging = Buffer(to, dsts_[i].size(), BufferKind::Staging);
      remote.upload.emplace(to, QueueKind::Transfer);
      remote.upload->copy(remote.staging, dsts_[i]);
    }
    remotes_.push_back(std::move(remote));
    remote_.push_back(i);
  }
  if (!remotes_.empty() && !src_.buffer->mapped()) {
    src_staging_ = Buffer(from, src_.size(), BufferKind::Staging);
    download_.emplace(from, QueueKind::Transfer);
    download_->copy(src_, src_staging_);
  }
  tickets_.resize(dsts_.size());
}

std::span<const Ticket> CrossDeviceCopy::start(std::span<const Ticket> src_ready) {
  if (local_copy_) {
    const Ticket done = local_copy_->submit(src_ready);
    for (std::size_t i : local_) tickets_[i] = done;
  }
  if (remotes_.empty()) return tickets_;
  const std::byte* from = nullptr;
  if (download_) {
    download_->submit(src_ready).wait();
    from = src_staging_.host().data();
  } else {
    for (const Ticket& t : src_ready) t.wait();
    from = src_.buffer->host().data() + src_.offset;
  }
  ++host_waits_;
  for (std::size_t k = 0; k < remotes_.size(); ++k) {
    Remote& r = remotes_[k];
    tickets_[remote_[k]].wait();  // the last upload out of this staging buffer
    std::byte* into = r.upload ? r.staging.host().data()
                               : const_cast<Buffer*>(r.dst.buffer)->host().data() + r.dst.offset;
    std::memcpy(into, from, src_.size());
    tickets_[remote_[k]] = r.upload ? r.upload->submit() : Ticket{};
  }
  return tickets_;
}

void CrossDeviceCopy::run(std::span<const Ticket> src_ready) {
  for (const Ticket& t : start(src_ready)) t.wait();
}

int CrossDeviceCopy::device_copies() const {
  int copies = download_ ? 1 : 0;
  for (const Remote& r : remotes_) copies += r.upload ? 1 : 0;
  return copies + static_cast<int>(local_.size());
}

void copy_across(BufferRange src, BufferRange dst, std::span<const Ticket> src_ready) {
  CrossDeviceCopy(src, dst).run(src_ready);
}

}  // namespace vkt
