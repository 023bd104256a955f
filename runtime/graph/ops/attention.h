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

/// What scaled_dot_product_attention does besides the product.
struct AttentionOptions {
  bool causal = false;
  /// Dropout on the attention probabilities in training (0: none).
  float dropout = 0.0f;
  /// The scores' scale; 0 means 1 / sqrt(D), D the last dimension of q.
  float scale = 0.0f;
};

/// softmax(q k^T * scale, masked) v for q [B, H, Tq, D], k and v [B, H, Tk, D]
/// (or rank 3, [B, T, D]): the composed path (the [Tq, Tk] scores live in
/// memory). Result [B, H, Tq, D].
///
///   vkt::Tensor y = vkt::scaled_dot_product_attention(q, k, v, {.causal = true});
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options = {});

}  // namespace vkt
