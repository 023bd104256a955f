#pragma once
// A stretch of a model whose weights are frozen, optionally in half.

#include <optional>

#include "graph.h"

namespace vkt {

/// While it lives, the weights made on `graph` (variables asked for as
/// trainable: every layer's kernels, biases, norms' scales) are frozen
/// instead, stored as `dtype`: f32, or f16 / bf16 in half the bytes (see
/// Graph::variable). PyTorch's `body.requires_grad_(False).to(torch.bfloat16)`,
/// or Keras' `trainable=False` on a sub-model with a bfloat16 policy: a
/// pretrained body kept fixed (warm start fills it) while a head trains. The
/// layers read a half weight through `cast` (`layer_weight`). State variables
/// (batch norm's moving averages) are made as asked, and a variable made
/// before the scope is returned as it is. Scopes nest; the one before comes
/// back when one goes.
///
///   vkt::Tensor body;
///   {
///     vkt::FrozenScope frozen(g, vkt::DType::BF16);
///     body = vkt::layers::dense(x, 512, vkt::layers::Activation::Relu, "body");
///   }
///   vkt::Tensor logits = vkt::layers::dense(body, 10, vkt::layers::Activation::None, "head");
class FrozenScope {
 public:
  /// `dtype` must be F32, F16 or BF16 (a vkt::Error otherwise).
  explicit FrozenScope(Graph& graph, DType dtype = DType::F32);
  ~FrozenScope();
  FrozenScope(const FrozenScope&) = delete;
  FrozenScope& operator=(const FrozenScope&) = delete;

 private:
  Graph& graph_;
  std::optional<DType> before_;
};

/// A weight as the layers compute with it: `variable` itself, or a frozen half
/// one widened to f32 (which a half product under the precision policy of
/// its type takes as stored).
Tensor layer_weight(const Tensor& variable);

}  // namespace vkt
