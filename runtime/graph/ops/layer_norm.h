#pragma once
// Layer normalization over the last dimension.

#include "../tensor.h"

namespace vkt {

/// y = (x - mean) / sqrt(var + epsilon) * gamma + beta, with the mean and the
/// (biased) variance taken over x's last dimension D for each row; x [..., D]
/// (rank 1 to 6, f32), gamma and beta [D]. One fused kernel forward; backward,
/// one kernel of row statistics, one for dx, and for dgamma and dbeta partial
/// sums over blocks of rows then a sum of the blocks, all in a fixed order
/// (the same bits every run). See
/// layers::layer_norm for the layer that owns gamma and beta.
///
///   vkt::Tensor gamma = g.variable("ln/gamma", {64}, vkt::Initializer::ones());
///   vkt::Tensor beta = g.variable("ln/beta", {64}, vkt::Initializer::zeros());
///   vkt::Tensor y = vkt::layer_norm(h, gamma, beta);  // h [N, 64]
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float epsilon = 1e-5f);

}  // namespace vkt
