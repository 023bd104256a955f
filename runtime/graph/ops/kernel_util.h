#pragma once
// Helpers the op files share for picking kernels and dispatching them.

#include <array>
#include <cstdint>
#include <initializer_list>

#include "../../vulkan/device.h"
#include "../../vulkan/kernel.h"
#include "../../vulkan/stream.h"
#include "../op.h"
#include "../shape.h"

namespace vkt::ops_detail {

constexpr std::uint32_t kLocalSize = 256;

/// The row kernels' workgroup: a row (or column) reduced by kRowLanes
/// invocations and a fixed tree (row_tree.glsl's ROW_LANES, reduce_rows.comp,
/// dense_bias_grad.comp); fixed on every device, so the sums' order is too.
constexpr std::uint32_t kRowLanes = 64;
/// Rows at least this long take the row kernels of softmax and layer norm;
/// shorter ones, one invocation per row.
constexpr std::uint32_t kRowKernelLen = 32;

/// The 1-D kernel `shader` specialised with OP = `op` (constant 1), cached per device.
inline const Kernel& kernel_1d(RecordContext& ctx, const char* shader, std::uint32_t op) {
  return ctx.device().kernel({.shader = shader,
                              .local_size = {kLocalSize, 1, 1},
                              .constants = {SpecConstant::u32(1, op)}});
}

/// Dispatches enough workgroups of `kernel` for `n` invocations, as a 2-D grid
/// past 65535 workgroups: the shader indexes with linear_index() (index.glsl).
template <typename Push>
void dispatch_1d(RecordContext& ctx, const Kernel& kernel,
                 std::initializer_list<BufferRange> buffers, const Push& push, std::int64_t n) {
  ctx.stream().dispatch(kernel, buffers, push,
                        Stream::linear_groups(kernel, static_cast<std::uint64_t>(n)));
}

/// `shape` right-aligned into 4 dimensions (padded with 1 on the left).
inline std::array<std::uint32_t, 4> dims4(const Shape& shape) {
  std::array<std::uint32_t, 4> d{1, 1, 1, 1};
  for (int i = 0; i < shape.rank(); ++i)
    d[4 - shape.rank() + i] = static_cast<std::uint32_t>(shape[i]);
  return d;
}

/// Row-major element strides of `shape` read along the 4 dims of `out`: 0 where
/// `shape` is broadcast (size 1, or absent on the left).
inline std::array<std::uint32_t, 4> broadcast_strides(const Shape& shape, const Shape& out) {
  const auto d = dims4(shape);
  const auto o = dims4(out);
  std::array<std::uint32_t, 4> s{};
  std::uint32_t stride = 1;
  for (int i = 3; i >= 0; --i) {
    s[i] = (d[i] == o[i]) ? stride : 0;
    stride *= d[i];
  }
  return s;
}

}  // namespace vkt::ops_detail
