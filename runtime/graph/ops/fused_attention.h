#pragma once
// The fused attention kernels (shaders/attention_*.comp) as graph ops.

#include <cstdint>
#include <optional>

#include "../tensor.h"

namespace vkt {

class Device;

namespace ops_detail {

/// What the fused kernels compute besides the product.
struct FusedAttentionParams {
  bool causal = false;
  float scale = 1.0f;
  float dropout = 0.0f;
  /// The dropout mask's key; the composed path's dropout draws the same mask with it.
  std::uint32_t key = 0;
};

/// The key-tile width the fused kernels take on `device` for head dimension
/// `d`: the widest whose shared memory fits; none when no width fits.
std::optional<std::uint32_t> fused_attention_tile(const Device& device, std::int64_t d);

/// softmax(scale * q k^T, causal) v with dropout on the probabilities, in three
/// kernels that never store the scores: q [B, H, Tq, D] (or [B, Tq, D]), k and
/// v [B, H, Tk, D]; `tile` from fused_attention_tile(). Result shaped as q, f32.
/// q, k and v are f32, or half tensors of one type (widened as the kernels read
/// them; their gradients are of that type, f32 sums rounded once).
Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                       const FusedAttentionParams& params, std::uint32_t tile);

}  // namespace ops_detail
}  // namespace vkt
