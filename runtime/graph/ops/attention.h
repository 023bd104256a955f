#pragma once
// Attention composed of the graph's ops: the masked, scaled softmax and
// scaled dot-product attention, each with its gradients from theirs.

#include "../tensor.h"

namespace vkt {

/// softmax(scale * scores) over the last axis, with masked entries 0: scores
/// [..., Tq, Tk]; `causal` masks key j for query i when j > i + Tk - Tq (a
/// query sees itself and what came before); `mask` (f32, broadcast to scores,
/// optional) keeps the entries where it is nonzero. A row with every entry
/// masked is NaN, as in PyTorch. Gradients flow to scores only.
///
///   vkt::Tensor p = vkt::masked_softmax(scores, 0.125f, true);
Tensor masked_softmax(const Tensor& scores, float scale = 1.0f, bool causal = false,
                      const Tensor& mask = Tensor{});

/// Which kernels compute attention.
enum class AttentionKernel {
  /// The fused kernels on GPUs whose shared memory holds their tiles (a head
  /// dimension up to 256), else the composed ops (always on CPU devices such
  /// as lavapipe, where shared-memory tiles are slow).
  Auto,
  /// The fused kernels (shaders/attention_*.comp): the scores live a tile at a
  /// time in shared memory, never in global memory; a vkt::Error where the
  /// device cannot run them.
  Fused,
  /// matmul, masked_softmax, dropout and matmul: the reference, with the
  /// [Tq, Tk] scores and probabilities in memory.
  Composed,
};

/// What scaled_dot_product_attention does besides the product.
struct AttentionOptions {
  bool causal = false;
  /// Dropout on the attention probabilities in training (0: none).
  float dropout = 0.0f;
  /// The scores' scale; 0 means 1 / sqrt(D), D the last dimension of q.
  float scale = 0.0f;
  AttentionKernel kernel = AttentionKernel::Auto;
};

/// softmax(q k^T * scale, masked) v for q [B, H, Tq, D], k and v [B, H, Tk, D]
/// (or rank 3, [B, T, D]). Result [B, H, Tq, D]. Both kernels drop the same
/// probabilities (a hash of the step, the example's row of the global batch
/// and the entry, as vkt::dropout draws), so they differ by float rounding
/// only; each is deterministic.
///
///   vkt::Tensor y = vkt::scaled_dot_product_attention(q, k, v, {.causal = true});
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options = {});

}  // namespace vkt
