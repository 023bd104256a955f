#pragma once
// Rotary position embedding (RoPE) as Llama applies it to queries and keys.

#include "../tensor.h"

namespace vkt {

/// Hugging Face's rotary embedding (the half-split form of LlamaRotaryEmbedding
/// and apply_rotary_pos_emb) of x [B, H, T, Dh] (f32, Dh even) at `positions`
/// (i32 [T], shared by the batch, or [B, T]):
///   y = x * cos + rotate_half(x) * sin,  rotate_half(x) = concat(-x[.., Dh/2:], x[.., :Dh/2]),
/// with cos and sin of angle[t, i] = positions[t] * inv_freq[i] repeated over
/// both halves, inv_freq[i] = 1 / theta^(2i / Dh). The positions are an input,
/// so one recorded program serves every step of generation (feed the position
/// of the new token). Computed as Hugging Face computes it in f32: inv_freq
/// rounded to f32 on the host (theta^(2i/Dh) rounded to f32, then its f32
/// reciprocal), the angle the f32 product of position and inv_freq (PyTorch's
/// angles bit for bit), and cos and sin of that angle to about an f32 ulp by
/// an exact reduction for angles up to ~1e5 (positions up to ~1e5 at
/// inv_freq[0] = 1), not the device's sin and cos, which are loose far from 0.
/// The gradient to x is the inverse rotation; none flows to the positions.
///
///   vkt::Tensor pos = g.input("positions", {T}, vkt::DType::I32);
///   vkt::Tensor q_rot = vkt::rotary_embedding(q, pos, 10000.0f);  // q [B, H, T, Dh]
Tensor rotary_embedding(const Tensor& x, const Tensor& positions, float theta = 10000.0f);

}  // namespace vkt
