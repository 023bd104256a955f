#pragma once
// Internal to matmul: the batched (rank-3) matmul of batch_matmul.cpp, which
// matmul() forwards rank-3 operands to, and what it shares with matmul.cpp.

#include <optional>
#include <string>
#include <vector>

#include "../../vulkan/buffer.h"
#include "../op.h"
#include "../tensor.h"
#include "texel_view.h"

namespace vkt {
class Device;
}

namespace vkt::matmul_detail {

/// matmul() of rank-3 operands (a [B, M, K] or [B, K, M], b [B, K, N] or
/// [B, N, K]); `a` and `b` already passed matmul's checks common to every rank,
/// `what` names the call in messages. Throws vkt::Error for unequal batches,
/// mismatched inner dimensions, or a rank-2 or rank-4 operand beside the rank-3 one.
Tensor batch_matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b,
                    const std::string& what);

/// matmul() without the graph's precision policy: f32 operands multiply in
/// f32 whatever GraphOptions::precision says.
Tensor f32_matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b);

/// matmul() of two rank-2 half operands of one type (f16 or bf16), a result
/// of that type summed in f32 (matmul_half.cpp); `what` names the call. Throws
/// vkt::Error for mixed types, other ranks, mismatched inner dimensions, or a
/// device without 16-bit storage.
Tensor half_matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b,
                   const std::string& what);

/// The gradients of C = op(A) op(B) (rank 2 or 3, given dC): dA = dC op(B)^T,
/// dB = op(A)^T dC, each laid out as the stored operand (matmul.cpp).
std::vector<Gradient> matmul_gradients(const Tensor& a, const Tensor& b, const Tensor& dy,
                                       bool transpose_a, bool transpose_b);

}  // namespace vkt::matmul_detail
