#include "cross_device_copy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
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
  // Where no side is mapped and every Device imports host memory, the bytes
  // pass through host memory they all import; else through staging buffers.
  std::size_t alignment = from.host_import_alignment();
  bool importable = !src_.buffer->mapped() && alignment != 0;
  for (std::size_t i = 0; i < dsts_.size(); ++i) {
    const Buffer& dst = *dsts_[i].buffer;
    if (&dst.device() == &from) continue;
    const std::size_t a = dst.device().host_import_alignment();
    importable = importable && !dst.mapped() && a != 0;
    alignment = std::max(alignment, a);  // powers of two: the largest is a multiple of each
  }
  if (!importable) alignment = 0;
  for (std::size_t i = 0; i < dsts_.size(); ++i) {
    if (&dsts_[i].buffer->device() == &from) {
      if (!local_copy_) local_copy_.emplace(from, QueueKind::Transfer);
      local_copy_->copy(src_, dsts_[i]);
      local_.push_back(i);
      continue;
    }
    Remote remote{dsts_[i], {}};
    if (alignment == 0) remote.up = StagedRange(dsts_[i], StagedRange::Direction::ToDevice);
    remotes_.push_back(std::move(remote));
    remote_.push_back(i);
  }
  if (!remotes_.empty() && alignment != 0) {
    build_imported(alignment);
  } else if (!remotes_.empty()) {
    down_ = StagedRange(src_, StagedRange::Direction::ToHost);
  }
  tickets_.resize(dsts_.size());
}

void CrossDeviceCopy::FreeBytes::operator()(std::byte* p) const {
  std::free(p);
}

void CrossDeviceCopy::build_imported(std::size_t alignment) {
  Device& from = src_.buffer->device();
  const std::size_t bytes = (src_.size() + alignment - 1) / alignment * alignment;
  for (int k = 0; k < 2; ++k) {
    Imported m;
    m.memory.reset(static_cast<std::byte*>(std::aligned_alloc(alignment, bytes)));
    if (!m.memory) throw Error(fmt::format("out of host memory for a copy of {} bytes", bytes));
    const std::span<std::byte> memory(m.memory.get(), bytes);
    m.on_source = Buffer(from, memory);
    m.in.emplace(from, QueueKind::Transfer);
    m.in->copy(src_, BufferRange(m.on_source, 0, src_.size()));
    for (const Remote& r : remotes_) {
      Device& to = r.dst.buffer->device();
      m.on_remote.emplace_back(to, memory);
      m.out.emplace_back(to, QueueKind::Transfer)
          .copy(BufferRange(m.on_remote.back(), 0, src_.size()), r.dst);
    }
    m.copied_out.resize(remotes_.size());
    imported_.push_back(std::move(m));
  }
}

std::span<const Ticket> CrossDeviceCopy::start_imported(std::span<const Ticket> src_ready,
                                                        std::span<const Ticket> dst_after) {
  Imported& m = imported_[next_imported_];
  next_imported_ ^= 1;
  // The copies out of this memory two starts back (done by now wherever the
  // caller waited for that step).
  for (const Ticket& t : m.copied_out) t.wait();
  m.in->submit(src_ready).wait();  // no semaphore spans two Devices: the host relays
  ++host_waits_;
  for (std::size_t k = 0; k < remotes_.size(); ++k) {
    m.copied_out[k] = m.out[k].submit(dst_after.empty() ? std::span<const Ticket>()
                                                        : dst_after.subspan(remote_[k], 1));
    tickets_[remote_[k]] = m.copied_out[k];
  }
  return tickets_;
}

std::span<const Ticket> CrossDeviceCopy::start(std::span<const Ticket> src_ready,
                                               std::span<const Ticket> dst_after) {
  if (!dst_after.empty() && dst_after.size() != dsts_.size()) {
    throw Error(fmt::format("cross-device copy: {} tickets to follow for {} destinations",
                            dst_after.size(), dsts_.size()));
  }
  if (local_copy_ && dst_after.empty()) {
    const Ticket done = local_copy_->submit(src_ready);
    for (std::size_t i : local_) tickets_[i] = done;
  } else if (local_copy_) {
    std::vector<Ticket> waits(src_ready.begin(), src_ready.end());
    for (std::size_t i : local_) waits.push_back(dst_after[i]);
    const Ticket done = local_copy_->submit(waits);
    for (std::size_t i : local_) tickets_[i] = done;
  }
  if (remotes_.empty()) return tickets_;
  if (!imported_.empty()) return start_imported(src_ready, dst_after);
  down_.submit(src_ready).wait();
  ++host_waits_;
  const std::byte* from = down_.host().data();
  for (std::size_t k = 0; k < remotes_.size(); ++k) {
    Remote& r = remotes_[k];
    tickets_[remote_[k]].wait();  // the last upload out of this staging buffer
    const std::span<const Ticket> after =
        dst_after.empty() ? std::span<const Ticket>() : dst_after.subspan(remote_[k], 1);
    if (!r.up.staged()) {  // the host writes the destination itself
      for (const Ticket& t : after) t.wait();
    }
    std::memcpy(r.up.host().data(), from, src_.size());
    tickets_[remote_[k]] = r.up.submit(after);
  }
  return tickets_;
}

void CrossDeviceCopy::run(std::span<const Ticket> src_ready) {
  for (const Ticket& t : start(src_ready)) t.wait();
}

int CrossDeviceCopy::device_copies() const {
  if (!imported_.empty()) return 1 + static_cast<int>(remotes_.size() + local_.size());
  int copies = down_.staged() ? 1 : 0;
  for (const Remote& r : remotes_) copies += r.up.staged() ? 1 : 0;
  return copies + static_cast<int>(local_.size());
}

void copy_across(BufferRange src, BufferRange dst, std::span<const Ticket> src_ready) {
  CrossDeviceCopy(src, dst).run(src_ready);
}

}  // namespace vkt
