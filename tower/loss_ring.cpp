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
    if (loss.size() != 4) throw Error("internal: a tower's loss is not one float");
    TowerSlots t;
    Device& device = loss.buffer->device();
    t.ring = std::make_unique<Buffer>(device, slots * 4, BufferKind::Staging);
    for (std::size_t k = 0; k < slots; ++k) {
      t.copies.emplace_back(loss, StagedRange::Direction::ToHost,
                            StagedRange::Options{.queue = QueueKind::Compute,
                                                 .lane = lanes[i],
                                                 .through = BufferRange(*t.ring, k * 4, 4),
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

float LossRing::add(std::uint64_t run, float sum) const {
  const std::size_t k = run % slots_;
  for (const TowerSlots& t : towers_) {
    if (t.run[k] != run + 1) {
      throw Error(
          fmt::format("internal: the loss of run {} is gone from its slot (the ring keeps {} runs)",
                      run, slots_));
    }
    t.copied[k].wait();
    float value = 0;
    std::memcpy(&value, t.copies[k].host().data(), 4);
    sum += value;
  }
  return sum;
}

}  // namespace vkt
