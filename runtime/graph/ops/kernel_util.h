#pragma once
// Helpers the op files share for picking kernels and dispatching them.

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

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
/// Rows at least this long take the row kernels of softmax, layer norm and
/// the sparse cross-entropy where the Device runs rows by workgroup
/// (row_workgroups); shorter ones, one invocation per row.
constexpr std::uint32_t kRowKernelLen = 32;

/// True when rows of `len` take a workgroup of kRowLanes each on `device`
/// (DeviceOptions::row_kernels; Auto: not on CPU devices).
inline bool row_workgroups(const Device& device, std::int64_t len) {
  if (len < kRowKernelLen) return false;
  switch (device.options().row_kernels) {
    case RowKernels::Workgroup:
      return true;
    case RowKernels::Invocation:
      return false;
    case RowKernels::Auto:
      break;
  }
  return device.info().type != DeviceType::Cpu;
}

/// The 1-D kernel `shader` specialised with OP = `op` (constant 1), cached per device.
inline const Kernel& kernel_1d(RecordContext& ctx, const char* shader, std::uint32_t op) {
  return ctx.device().kernel({.shader = shader,
                              .local_size = {kLocalSize, 1, 1},
                              .constants = {SpecConstant::u32(1, op)}});
}

/// Why `t` is not f32, for an op's message: "holds i32 values", or for the
/// half types "holds f16 values (vkt::cast(x, vkt::DType::F32) converts them)".
inline std::string not_f32(const Tensor& t) {
  return fmt::format("holds {} values{}", to_string(t.dtype()),
                     is_half(t.dtype()) ? " (vkt::cast(x, vkt::DType::F32) converts them)" : "");
}

/// A float tensor's element type as the kernels' type constants code it
/// (half.glsl's codes): 0 f32, 1 f16, 2 bf16.
inline std::uint32_t float_type_code(DType dtype) {
  return dtype == DType::F16 ? 1u : dtype == DType::BF16 ? 2u : 0u;
}

/// Whether an elementwise op over `n` elements takes its `_vec4` kernel (one
/// vec4 of each operand an invocation; tensors start 16-byte aligned).
inline bool elementwise_vec4(std::int64_t n) {
  return n % 4 == 0;
}

/// Dispatches enough workgroups of `kernel` for `n` invocations, as a 2-D grid
/// past 65535 workgroups: the shader indexes with linear_index() (index.glsl).
template <typename Push>
void dispatch_1d(RecordContext& ctx, const Kernel& kernel,
                 std::initializer_list<BufferRange> buffers, const Push& push, std::int64_t n) {
  ctx.stream().dispatch(kernel, buffers, push,
                        Stream::linear_groups(kernel, static_cast<std::uint64_t>(n)));
}

}  // namespace vkt::ops_detail
