#include "weight_broadcast.h"

#include <fmt/format.h>

#include <algorithm>

#include "../runtime/vulkan/device.h"
#include "../runtime/vulkan/error.h"
#include "half_packing.h"

namespace vkt {

WeightBroadcast::WeightBroadcast(BufferRange master, std::vector<BufferRange> towers,
                                 const std::vector<Range>& trainable, DType dtype)
    : dtype_(dtype) {
  if (dtype != DType::F32 && !is_half(dtype)) {
    throw Error(
        fmt::format("weights travel to the towers as f32, f16 or bf16, not {}", to_string(dtype)));
  }
  const auto slice = [](const BufferRange& r, std::size_t offset, std::size_t bytes) {
    return BufferRange(*r.buffer, r.offset + offset, bytes);
  };
  const auto copy_to_towers = [&](std::size_t offset, std::size_t bytes) {
    std::vector<BufferRange> to;
    for (const BufferRange& t : towers) to.push_back(slice(t, offset, bytes));
    f32_.push_back(std::make_unique<CrossDeviceCopy>(slice(master, offset, bytes), to));
  };
  std::vector<Range> half = is_half(dtype) ? trainable : std::vector<Range>{};
  std::sort(half.begin(), half.end(),
            [](const Range& a, const Range& b) { return a.offset < b.offset; });
  // The f32 rest: the gaps between the half ranges.
  std::size_t at = 0;
  for (const Range& r : half) {
    if (r.offset < at || r.offset + r.bytes > master.size()) {
      throw Error("internal: the trainable weights overlap or lie outside the arena");
    }
    if (r.offset > at) copy_to_towers(at, r.offset - at);
    at = r.offset + r.bytes;
  }
  if (at < master.size()) copy_to_towers(at, master.size() - at);
  tickets_.resize(towers.size());
  if (half.empty()) return;

  Device& device = master.buffer->device();
  std::vector<std::size_t> packed_at;
  std::size_t total = 0;
  for (const Range& r : half) {
    packed_at.push_back(total);
    total += (packed_bytes(r.bytes / 4) + 15) / 16 * 16;
  }
  packed_.emplace(device, total);
  pack_.emplace(device);
  for (std::size_t i = 0; i < half.size(); ++i) {
    record_pack_half(*pack_, slice(master, half[i].offset, half[i].bytes),
                     BufferRange(*packed_, packed_at[i], packed_bytes(half[i].bytes / 4)), dtype);
  }
  arrived_.reserve(towers.size());  // the copy and the streams point at them
  unpack_.reserve(towers.size());
  std::vector<BufferRange> staging;
  for (const BufferRange& t : towers) {
    arrived_.emplace_back(t.buffer->device(), total);
    staging.emplace_back(arrived_.back());
    unpack_.emplace_back(t.buffer->device());
    for (std::size_t i = 0; i < half.size(); ++i) {
      record_unpack_half(
          unpack_.back(),
          BufferRange(arrived_.back(), packed_at[i], packed_bytes(half[i].bytes / 4)),
          slice(t, half[i].offset, half[i].bytes), dtype);
    }
  }
  half_ = std::make_unique<CrossDeviceCopy>(BufferRange(*packed_), staging);
}

WeightBroadcast::~WeightBroadcast() = default;

std::span<const Ticket> WeightBroadcast::start(std::span<const Ticket> master_ready,
                                               std::span<const Ticket> tower_after) {
  // Per tower, everything its arena waits for: the f32 copies and the half bytes.
  std::vector<std::vector<Ticket>> arrived(tickets_.size());
  for (const auto& copy : f32_) {
    const std::span<const Ticket> done = copy->start(master_ready, tower_after);
    for (std::size_t t = 0; t < done.size(); ++t) arrived[t].push_back(done[t]);
  }
  if (!half_) {
    for (std::size_t t = 0; t < tickets_.size(); ++t) {
      // One f32 copy of the whole arena: its ticket is the tower's.
      tickets_[t] = arrived[t].empty() ? Ticket{} : arrived[t].back();
    }
    return tickets_;
  }
  const Ticket packed = pack_->submit(master_ready);
  // The staging copies are the tower's own buffers: only the widening waits
  // for the tower's earlier work on its arena.
  const std::span<const Ticket> copied = half_->start({&packed, 1});
  for (std::size_t t = 0; t < tickets_.size(); ++t) {
    arrived[t].push_back(copied[t]);
    if (!tower_after.empty()) arrived[t].push_back(tower_after[t]);
    tickets_[t] = unpack_[t].submit(arrived[t]);
  }
  return tickets_;
}

void WeightBroadcast::run() {
  for (const Ticket& t : start()) t.wait();
}

std::uint64_t WeightBroadcast::host_waits() const {
  std::uint64_t waits = half_ ? half_->host_waits() : 0;
  for (const auto& copy : f32_) waits += copy->host_waits();
  return waits;
}

}  // namespace vkt
