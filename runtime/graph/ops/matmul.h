#pragma once
// Matrix multiplication with transpose flags, and bias_add.

#include "../tensor.h"

namespace vkt {

class Device;

/// op(a) * op(b), where op transposes when its flag is set: a [M, K] (or [K, M]
/// with transpose_a) times b [K, N] (or [N, K] with transpose_b) gives [M, N].
/// Both operands are rank-2 f32 tensors of one graph; a mismatch is a vkt::Error
/// naming both tensors and both shapes, raised when the graph is built.
/// Rank-3 operands are batches of matrices, multiplied matrix by matrix (the
/// flags transpose each one): a [B, M, K] (or [B, K, M]) times b [B, K, N] (or
/// [B, N, K]) gives [B, M, N]. The batch dimensions must be equal; a rank-2
/// operand beside a rank-3 one is an error (reshape, or broadcast_to the batch).
/// Operands of rank 4 to 6 (both of one rank) have several batch dimensions
/// ([B, H, T, D]: attention's heads), equal in both and folded into one
/// without a copy.
///
///   vkt::Tensor logits = vkt::matmul(x, w);              // [32, 784] x [784, 10]
///   vkt::Tensor gram = vkt::matmul(x, x, true, false);   // x^T x: [784, 784]
///   vkt::Tensor scores = vkt::matmul(q, k, false, true); // [8, 64, 32] x [8, 64, 32]^T: [8, 64,
///   64]
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);

/// x + bias along the last dimension: x [..., D], bias [D]. The bias gradient
/// is the sum of dy over every other dimension.
Tensor bias_add(const Tensor& x, const Tensor& bias);

/// The kernels matmul can record. Texel (for lavapipe): operands read as RGBA32F
/// texel buffers into large per-invocation register blocks, no shared memory.
/// Tiled (for GPUs): shared-memory tiles with a register block per thread.
/// Both run on any Vulkan device and give the same values up to rounding.
enum class MatmulVariant { Tiled, Texel };

/// The variant matmul records on `device`: its DeviceOptions::matmul (which
/// VKT_MATMUL_VARIANT sets where the Device is made), Auto meaning Texel on
/// lavapipe and Tiled elsewhere. An operand whose memory cannot be
/// bound as a texel buffer (offset alignment, size limit) is read by the tiled
/// kernel whatever the choice.
MatmulVariant matmul_variant(const Device& device);

}  // namespace vkt
