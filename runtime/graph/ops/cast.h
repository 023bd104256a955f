#pragma once
// Conversions between f32 and the half types (f16, bf16), with gradients.

#include "../tensor.h"

namespace vkt {

/// x converted to `dtype`, elementwise: f32 <-> f16 <-> bf16, rounding to
/// nearest with ties to even (overflow to infinity, subnormals kept, NaN a
/// quiet NaN; the bits of half.h on every device). The gradient is dy cast
/// back to x's type. The same type returns x; i32 is refused (a vkt::Error).
///
///   vkt::Tensor xh = vkt::cast(x, vkt::DType::BF16);     // half the bytes
///   vkt::Tensor y = vkt::matmul(xh, vkt::cast(w, vkt::DType::BF16));  // bf16, f32 sums
///   vkt::Tensor loss = vkt::reduce_sum(vkt::cast(y, vkt::DType::F32));
Tensor cast(const Tensor& x, DType dtype);

}  // namespace vkt
