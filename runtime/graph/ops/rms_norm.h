#pragma once
// RMS normalization over the last dimension (Llama's RMSNorm).

#include "../tensor.h"

namespace vkt {

/// y = x / sqrt(mean(x^2) + epsilon) * gamma, the mean of squares taken over
/// x's last dimension D for each row, in f32 (Hugging Face's LlamaRMSNorm; no
/// mean subtracted, no offset); x [..., D] (rank 1 to 6, f32), gamma [D]. One
/// fused kernel forward; backward, one kernel of row statistics, one for dx,
/// and for dgamma layer_norm's partial sums over blocks of rows, all in a fixed
/// order (the same bits every run). Rows of 32 and more take a workgroup each
/// where the device runs rows by workgroup (as layer_norm). See
/// layers::rms_norm for the layer that owns gamma.
///
///   vkt::Tensor gamma = g.variable("norm/gamma", {64}, vkt::Initializer::ones());
///   vkt::Tensor y = vkt::rms_norm(h, gamma, 1e-6f);  // h [B, T, 64]
Tensor rms_norm(const Tensor& x, const Tensor& gamma, float epsilon = 1e-6f);

}  // namespace vkt
