#pragma once
// The dense layer fused: its forward as one matmul kernel with a bias and
// activation epilogue, its backward products with the activation's gradient
// formed as they load dy (shaders/matmul_bias_act_*.comp, matmul_dact_*.comp).

#include "../tensor.h"
#include "layers.h"

namespace vkt {

/// Whether matmul_bias_act takes `activation`: every one whose derivative
/// follows from its output. Gelu's does not, so layers::dense applies gelu
/// after matmul_bias_act(..., Activation::None) and keeps its pre-activation.
bool fuses_activation(layers::Activation activation);

/// act(x * w + bias) in one dispatch: x [M, K], w [K, N], bias [N] give [M, N].
/// The gradients take three dispatches: dx and dw are matmuls that form
/// dy * act'(y) as they load dy, and one kernel sums it into the bias
/// gradient. Shapes, types and an activation it does not take are vkt::Errors.
///
///   vkt::Tensor h = vkt::matmul_bias_act(x, w, b, vkt::layers::Activation::Relu);
Tensor matmul_bias_act(const Tensor& x, const Tensor& w, const Tensor& bias,
                       layers::Activation activation);

}  // namespace vkt
