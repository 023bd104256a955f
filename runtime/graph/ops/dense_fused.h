#pragma once
// The dense layer fused: its forward as one matmul kernel with a bias and
// activation epilogue (shaders/matmul_bias_act_*.comp), its backward from the
// layer's output alone (dense_pre_grad.comp, or matmul_dact_*.comp).

#include "../tensor.h"
#include "layers.h"

namespace vkt {

/// Whether matmul_bias_act takes `activation`: every one whose derivative
/// follows from its output. Gelu's does not, so layers::dense applies gelu
/// after matmul_bias_act(..., Activation::None) and keeps its pre-activation.
bool fuses_activation(layers::Activation activation);

/// How matmul_bias_act's gradient applies act'(y). Materialized: one pass
/// (two ops the Executor fuses) writes dpre = dy * act'(y) and sums it into
/// the bias gradient, then two plain matmuls. InMatmuls: the two matmuls form
/// dpre as they load dy (never written) and one kernel sums the bias
/// gradient: as many dispatches, but slower on lavapipe, where the extra
/// texel fetch sits in the matmul's inner loop (docs/PERFORMANCE.md, "Fusion").
enum class DenseBackward { Materialized, InMatmuls };

/// act(x * w + bias) in one dispatch: x [M, K], w [K, N], bias [N] give [M, N].
/// Shapes, types and an activation it does not take are vkt::Errors.
///
///   vkt::Tensor h = vkt::matmul_bias_act(x, w, b, vkt::layers::Activation::Relu);
Tensor matmul_bias_act(const Tensor& x, const Tensor& w, const Tensor& bias,
                       layers::Activation activation,
                       DenseBackward backward = DenseBackward::Materialized);

}  // namespace vkt
