#pragma once
// Internal to layer_norm and rms_norm: the checks both make of their input
// and epsilon, in one wording.

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "../../vulkan/error.h"
#include "kernel_util.h"

namespace vkt::ops_detail {

/// Checks x (f32, rank >= 1, within the kernels' 32-bit index) and epsilon
/// (finite, >= 0; `usual` is named as the common choice) of norm `op`;
/// returns the "op('x' [shape])" the caller's own messages start with.
inline std::string check_norm_input(const char* op, const Tensor& x, float epsilon,
                                    const char* usual) {
  if (!x.valid()) throw Error(fmt::format("{}: the input tensor is empty", op));
  const std::string what = fmt::format("{}('{}' {})", op, x.name(), x.shape().str());
  if (x.dtype() != DType::F32)
    throw Error(fmt::format("{}: x {}; {} takes f32", what, not_f32(x), op));
  if (x.shape().rank() == 0) {
    throw Error(what + ": x is a scalar; it needs a last dimension to normalize over");
  }
  if (x.shape().elements() > std::numeric_limits<std::uint32_t>::max()) {
    throw Error(fmt::format("{}: x has {} elements; the kernels index at most 2^32 - 1", what,
                            x.shape().elements()));
  }
  if (!std::isfinite(epsilon) || epsilon < 0.0f) {
    throw Error(fmt::format("{}: epsilon is {}; it must be finite and at least 0 ({} is usual)",
                            what, epsilon, usual));
  }
  return what;
}

}  // namespace vkt::ops_detail
