#include "fold_axes.h"

#include <fmt/format.h>

#include <cstdlib>
#include <limits>

#include "../../vulkan/error.h"

namespace vkt::ops_detail {
namespace {

constexpr int kKernelDims = 4;

}  // namespace

std::optional<BroadcastFold> fold_broadcast(const Shape& out, std::span<const Shape> operands) {
  // Per kept axis of out: its size and, per operand, whether the operand spans it.
  std::vector<std::int64_t> dims;
  std::vector<std::vector<bool>> spans;
  for (int axis = 0; axis < out.rank(); ++axis) {
    if (out[axis] == 1) continue;  // every operand is 1 there too
    std::vector<bool> spanned;
    for (const Shape& s : operands) {
      const int own = s.rank() - out.rank() + axis;
      spanned.push_back(own >= 0 && s[own] == out[axis]);
    }
    if (!spans.empty() && spans.back() == spanned) {
      dims.back() *= out[axis];
    } else {
      dims.push_back(out[axis]);
      spans.push_back(std::move(spanned));
    }
  }
  if (dims.size() > kKernelDims) return std::nullopt;
  BroadcastFold fold;
  fold.strides.assign(operands.size(), {0, 0, 0, 0});
  const std::size_t pad = kKernelDims - dims.size();
  for (std::size_t k = 0; k < dims.size(); ++k) {
    fold.dims[pad + k] = static_cast<std::uint32_t>(dims[k]);
  }
  for (std::size_t o = 0; o < operands.size(); ++o) {
    std::uint32_t stride = 1;
    for (std::size_t k = dims.size(); k-- > 0;) {
      if (!spans[k][o]) continue;
      fold.strides[o][pad + k] = stride;
      stride *= static_cast<std::uint32_t>(dims[k]);
    }
  }
  return fold;
}

BroadcastFold fold_broadcast_or_throw(const Shape& out, std::span<const Shape> operands,
                                      const std::string& what) {
  if (auto fold = fold_broadcast(out, operands)) return *std::move(fold);
  std::vector<std::string> shapes;
  for (const Shape& s : operands) shapes.push_back(s.str());
  throw Error(fmt::format(
      "{}: {} broadcast to {} need more than 4 axes even with neighbours that broadcast "
      "alike merged, and the kernels index 4; merge adjacent axes with a reshape first",
      what, fmt::join(shapes, " and "), out.str()));
}

std::optional<PadFold> fold_pad(const Shape& out, const Shape& in,
                                std::span<const std::int64_t> offset) {
  std::vector<std::int64_t> out_dims, in_dims, offsets;
  for (int axis = 0; axis < out.rank(); ++axis) {
    const auto a = static_cast<std::size_t>(axis);
    const bool plain = out[axis] == in[axis] && offset[a] == 0;
    // Whole rows of the axis on the left: (o, i) -> o * n + i in both tensors
    // (while the merged offset still fits the kernel's int).
    if (plain && !out_dims.empty() &&
        std::llabs(offsets.back()) <= std::numeric_limits<std::int32_t>::max() / out[axis]) {
      out_dims.back() *= out[axis];
      in_dims.back() *= in[axis];
      offsets.back() *= out[axis];
      continue;
    }
    out_dims.push_back(out[axis]);
    in_dims.push_back(in[axis]);
    offsets.push_back(offset[a]);
  }
  if (out_dims.size() > kKernelDims) return std::nullopt;
  PadFold fold;
  const std::size_t pad = kKernelDims - out_dims.size();
  for (std::size_t k = 0; k < out_dims.size(); ++k) {
    fold.out_dims[pad + k] = static_cast<std::uint32_t>(out_dims[k]);
    fold.in_dims[pad + k] = static_cast<std::uint32_t>(in_dims[k]);
    fold.offset[pad + k] = static_cast<std::int32_t>(offsets[k]);
  }
  return fold;
}

}  // namespace vkt::ops_detail
