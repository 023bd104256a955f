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
  build(std::move(tower_gradients));
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
  build(std::move(tower_gradients));
}

void GradientReducer::build(std::vector<BufferRange> tower_gradients) {
  for (std::size_t i = 0; i < tower_gradients.size(); ++i) {
    copies_.push_back(std::make_unique<CrossDeviceCopy>(
        tower_gradients[i], BufferRange(gathered_, i * stride_, bytes_)));
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
    copies_[i]->run(ready.empty() ? std::span<const Ticket>{} : ready.subspan(i, 1));
  }
  return add_.submit();
}

}  // namespace vkt
