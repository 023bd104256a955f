#include "weight_broadcast.h"

#include <fmt/format.h>

#include <algorithm>

#include "../runtime/vulkan/device.h"
#include "../runtime/vulkan/error.h"
#include "half_packing.h"

namespace vkt {

WeightBroadcast::WeightBroadcast(BufferRange master, std::vector<BufferRange> towers,
                                 const std::vector<Range>& trainable, DType dtype) {
  if (dtype != DType::F32 && !is_half(dtype)) {
    throw Error(
        fmt::format("weights travel to the towers as f32, f16 or bf16, not {}", to_string(dtype)));
  }
  tickets_.resize(towers.size());
  if (dtype == DType::F32 || trainable.empty()) {
    f32_ = std::make_unique<CrossDeviceCopy>(master, towers);
    return;
  }
  const auto slice = [](const BufferRange& r, std::size_t offset, std::size_t bytes) {
    return BufferRange(*r.buffer, r.offset + offset, bytes);
  };
  // The arena cut into pieces in order: each trainable weight (half) and the
  // stretches between them (f32, copied as they are), each at a 16-byte slot
  // of one packed buffer, so that a single copy carries a step's weights.
  struct Piece {
    std::size_t offset, bytes;
    bool half;
    std::size_t packed_at = 0;
  };
  std::vector<Range> sorted = trainable;
  std::sort(sorted.begin(), sorted.end(),
            [](const Range& a, const Range& b) { return a.offset < b.offset; });
  std::vector<Piece> pieces;
  std::size_t at = 0;
  for (const Range& r : sorted) {
    if (r.offset < at || r.offset + r.bytes > master.size()) {
      throw Error("internal: the trainable weights overlap or lie outside the arena");
    }
    if (r.offset > at) pieces.push_back({at, r.offset - at, false});
    pieces.push_back({r.offset, r.bytes, true});
    at = r.offset + r.bytes;
  }
  if (at < master.size()) pieces.push_back({at, master.size() - at, false});
  const auto packed_size = [](const Piece& p) {
    return p.half ? packed_bytes(p.bytes / 4) : p.bytes;
  };
  std::size_t total = 0;
  for (Piece& p : pieces) {
    p.packed_at = total;
    total += (packed_size(p) + 15) / 16 * 16;
  }

  Device& device = master.buffer->device();
  packed_.emplace(device, total);
  pack_.emplace(device);
  for (const Piece& p : pieces) {
    const BufferRange to(*packed_, p.packed_at, packed_size(p));
    if (p.half) {
      record_pack_half(*pack_, slice(master, p.offset, p.bytes), to, dtype);
    } else {
      pack_->copy(slice(master, p.offset, p.bytes), to);
    }
  }
  arrived_.reserve(towers.size());  // the copy and the streams point at them
  unpack_.reserve(towers.size());
  std::vector<BufferRange> staging;
  for (const BufferRange& t : towers) {
    arrived_.emplace_back(t.buffer->device(), total);
    staging.emplace_back(arrived_.back());
    unpack_.emplace_back(t.buffer->device());
    for (const Piece& p : pieces) {
      const BufferRange from(arrived_.back(), p.packed_at, packed_size(p));
      if (p.half) {
        record_unpack_half(unpack_.back(), from, slice(t, p.offset, p.bytes), dtype);
      } else {
        unpack_.back().copy(from, slice(t, p.offset, p.bytes));
      }
    }
  }
  half_ = std::make_unique<CrossDeviceCopy>(BufferRange(*packed_), staging);
}

WeightBroadcast::~WeightBroadcast() = default;

std::span<const Ticket> WeightBroadcast::start(std::span<const Ticket> master_ready,
                                               std::span<const Ticket> tower_after) {
  if (f32_) {
    const std::span<const Ticket> done = f32_->start(master_ready, tower_after);
    std::copy(done.begin(), done.end(), tickets_.begin());
    return tickets_;
  }
  const Ticket packed = pack_->submit(master_ready);
  // The staging buffers are the copy's own: only the widening into a
  // tower's arena waits for that tower's earlier work on it.
  const std::span<const Ticket> copied = half_->start({&packed, 1});
  for (std::size_t t = 0; t < tickets_.size(); ++t) {
    std::vector<Ticket> waits{copied[t]};
    if (!tower_after.empty()) waits.push_back(tower_after[t]);
    tickets_[t] = unpack_[t].submit(waits);
  }
  return tickets_;
}

void WeightBroadcast::run() {
  for (const Ticket& t : start()) t.wait();
}

std::uint64_t WeightBroadcast::host_waits() const {
  return (f32_ ? f32_->host_waits() : 0) + (half_ ? half_->host_waits() : 0);
}

}  // namespace vkt
