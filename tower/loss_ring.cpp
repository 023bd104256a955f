#include "loss_ring.h"

#include <fmt/format.h>

#include <cstring>

#include "../runtime/vulkan/error.h"

namespace vkt {

LossRing::LossRing(const std::vector<BufferRange>& losses, const std::vector<std::uint32_t>& lanes,
                   std::size_t slots)
    : slots_(slots) {
  if (slots == 0 || lanes.size() != losses.size()) throw Error("internal: a loss ring's shape");
  for (std::size_t i = 0; i < losses.size(); ++i) {
    const BufferRange& loss = losses[i];
    const std::size_t bytes = loss.size();
    if (bytes == 0 || bytes % 4 != 0) throw Error("internal: a loss ring's source is not floats");
    TowerSlots t;
    Device& device = loss.buffer->device();
    t.ring = std::make_unique<Buffer>(device, slots * bytes, BufferKind::Staging);
    for (std::size_t k = 0; k < slots; ++k) {
      t.copies.emplace_back(loss, StagedRange::Direction::ToHost,
                            StagedRange::Options{.queue = QueueKind::Compute,
                                                 .lane = lanes[i],
                                                 .through = BufferRange(*t.ring, k * bytes, bytes),
                                                 .even_if_mapped = true});
    }
    t.copied.resize(slots);
    t.run.assign(slots, 0);
    towers_.push_back(std::move(t));
  }
}

void LossRing::record(std::size_t tower, std::uint64_t run, const Ticket& written) {
  TowerSlots& t = towers_.at(tower);
  const std::size_t k = run % slots_;
  t.copied[k] = t.copies[k].submit({&written, 1});
  t.run[k] = run + 1;
}

const LossRing::TowerSlots& LossRing::slot_of(std::size_t source, std::uint64_t run) const {
  const TowerSlots& t = towers_.at(source);
  const std::size_t k = run % slots_;
  if (t.run[k] != run + 1) {
    throw Error(
        fmt::format("internal: the copy of run {} is gone from its slot (the ring keeps {} runs)",
                    run, slots_));
  }
  t.copied[k].wait();
  return t;
}

float LossRing::add(std::uint64_t run, float sum) const {
  for (std::size_t i = 0; i < towers_.size(); ++i) {
    float value = 0;
    std::memcpy(&value, slot_of(i, run).copies[run % slots_].host().data(), 4);
    sum += value;
  }
  return sum;
}

std::vector<float> LossRing::read(std::size_t source, std::uint64_t run) const {
  const std::span<const std::byte> bytes = slot_of(source, run).copies[run % slots_].host();
  std::vector<float> values(bytes.size() / 4);
  std::memcpy(values.data(), bytes.data(), values.size() * 4);
  return values;
}

}  // namespace vkt
