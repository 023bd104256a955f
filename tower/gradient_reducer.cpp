#include "gradient_reducer.h"

#include <fmt/format.h>

#include "../runtime/vulkan/device.h"
#include "../runtime/vulkan/error.h"
#include "../runtime/vulkan/kernel.h"

namespace vkt {
namespace {

std::size_t checked_bytes(const std::vector<BufferRange>& ranges) {
  if (ranges.empty()) throw Error("GradientReducer: no tower gradients given");
  const std::size_t bytes = ranges.front().size();
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    if (ranges[i].size() != bytes) {
      throw Error(
          fmt::format("GradientReducer: tower {} has {} bytes of gradients but tower 0 has "
                      "{}; every tower must run the same model",
                      i, ranges[i].size(), bytes));
    }
  }
  return bytes;
}

std::size_t round16(std::size_t bytes) {
  return (bytes + 15) / 16 * 16;
}

}  // namespace

GradientReducer::GradientReducer(std::vector<BufferRange> tower_gradients, Device& consolidation)
    : bytes_(checked_bytes(tower_gradients)),
      stride_(round16(bytes_)),
      gathered_(consolidation, stride_ * tower_gradients.size()),
      sum_(consolidation, stride_),
      destination_(sum_),
      add_(consolidation) {
  build(whole(tower_gradients));
}

GradientReducer::GradientReducer(std::vector<BufferRange> tower_gradients, BufferRange destination)
    : bytes_(checked_bytes(tower_gradients)),
      stride_(round16(bytes_)),
      gathered_(destination.buffer->device(), stride_ * tower_gradients.size()),
      destination_(destination),
      add_(destination.buffer->device()) {
  if (destination.size() != stride_) {
    throw Error(
        fmt::format("GradientReducer: the destination holds {} bytes, the towers' gradients "
                    "{} ({} rounded up to 16)",
                    destination.size(), stride_, bytes_));
  }
  build(whole(tower_gradients));
}

GradientReducer::GradientReducer(const std::vector<std::vector<Segment>>& towers,
                                 BufferRange destination)
    : bytes_(destination.size()),
      stride_(destination.size()),
      gathered_(destination.buffer->device(),
                std::max<std::size_t>(stride_, 16) * std::max<std::size_t>(towers.size(), 1)),
      destination_(destination),
      add_(destination.buffer->device()) {
  if (towers.empty()) throw Error("GradientReducer: no tower gradients given");
  if (stride_ % 16 != 0) {
    throw Error(fmt::format("GradientReducer: the destination holds {} bytes, not a multiple of 16",
                            stride_));
  }
  for (std::size_t t = 0; t < towers.size(); ++t) {
    if (towers[t].size() != towers[0].size()) {
      throw Error("GradientReducer: every tower must give the same segments");
    }
    for (std::size_t i = 0; i < towers[t].size(); ++i) {
      const Segment& s = towers[t][i];
      if (s.source.size() != towers[0][i].source.size() || s.offset != towers[0][i].offset ||
          s.offset + s.source.size() > stride_) {
        throw Error(
            fmt::format("GradientReducer: tower {}'s segment {} does not match tower 0's "
                        "or does not fit the destination",
                        t, i));
      }
    }
  }
  build(towers);
}

std::vector<std::vector<GradientReducer::Segment>> GradientReducer::whole(
    const std::vector<BufferRange>& ranges) {
  std::vector<std::vector<Segment>> out;
  for (const BufferRange& r : ranges) out.push_back({Segment{r, 0}});
  return out;
}

void GradientReducer::build(const std::vector<std::vector<Segment>>& towers) {
  for (std::size_t t = 0; t < towers.size(); ++t) {
    copies_.emplace_back();
    for (const Segment& s : towers[t]) {
      copies_.back().push_back(std::make_unique<CrossDeviceCopy>(
          s.source, BufferRange(gathered_, t * stride_ + s.offset, s.source.size())));
    }
  }
  struct {
    std::uint32_t vectors, towers, stride;
  } push{static_cast<std::uint32_t>(stride_ / 16), static_cast<std::uint32_t>(copies_.size()),
         static_cast<std::uint32_t>(stride_ / 16)};
  Device& device = gathered_.device();
  const Kernel& kernel = device.kernel({.shader = "add_n", .local_size = {256, 1, 1}});
  add_.dispatch(kernel, {gathered_, destination_}, push,
                Stream::linear_groups(kernel, push.vectors));
}

Ticket GradientReducer::run(std::span<const Ticket> ready) {
  if (!ready.empty() && ready.size() != copies_.size()) {
    throw Error(fmt::format("GradientReducer::run: {} tickets for {} towers", ready.size(),
                            copies_.size()));
  }
  for (std::size_t i = 0; i < copies_.size(); ++i) {
    for (const auto& copy : copies_[i]) {
      copy->run(ready.empty() ? std::span<const Ticket>{} : ready.subspan(i, 1));
    }
  }
  return add_.submit();
}

}  // namespace vkt
