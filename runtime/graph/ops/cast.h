#pragma once
// Conversions between f32 and the half types (f16, bf16), with gradients.

#include <optional>

#include "../tensor.h"

namespace vkt {

/// x converted to `dtype`, elementwise: f32 <-> f16 <-> bf16, rounding to
/// nearest with ties to even (overflow to infinity, subnormals kept, NaN a
/// quiet NaN; the bits of half.h on every device). The gradient is dy cast
/// back to x's type. The same type returns x, and an f32 x that is a half
/// tensor h widened (cast(h, DType::F32)) cast back to h's type returns h,
/// the same values; i32 is refused (a vkt::Error).
///
///   vkt::Tensor xh = vkt::cast(x, vkt::DType::BF16);     // half the bytes
///   vkt::Tensor y = vkt::matmul(xh, vkt::cast(w, vkt::DType::BF16));  // bf16, f32 sums
///   vkt::Tensor loss = vkt::reduce_sum(vkt::cast(y, vkt::DType::F32));
Tensor cast(const Tensor& x, DType dtype);

/// The half tensor that f32 x is the exact widening of (x = cast(h,
/// DType::F32) with h f16 or bf16), if x is one.
std::optional<Tensor> widened_from(const Tensor& x);

/// f32 x rounded to the nearest value of the half type `half`, kept f32: the
/// bits of cast(cast(x, half), DType::F32) in one elementwise op (which fuses
/// into elementwise chains), its gradient dy rounded the same way. What the
/// precision policy runs on devices whose matmuls take the f32 texel kernel.
/// An x that is already such a rounding to `half` is returned as it is.
Tensor round_to_half(const Tensor& x, DType half);

/// f32 x as an operand of a half product under the graph's precision policy
/// (GraphOptions::precision): cast to the half type where the device's
/// products take half tensors (kernels that widen it as they read it),
/// round_to_half where they take the f32 texel kernel (the same values, f32
/// storage). Under fp32, or for a tensor not f32, x itself.
Tensor policy_operand(const Tensor& x);

/// f32 x rounded to the graph's policy type and stored in it, as autocast
/// stores a product's output: policy_operand(x) widened back to f32 where
/// that is a half tensor (a gradient that reads the result reads the half
/// tensor). Under fp32, or for a tensor not f32, x itself.
Tensor policy_round(const Tensor& x);

}  // namespace vkt
