// Attention from matmul, where, softmax and dropout (the reference path, and
// the fallback wherever the fused kernels do not fit), or the fused kernels.
#include "attention.h"

#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "cast.h"
#include "dropout.h"
#include "elementwise.h"
#include "fused_attention.h"
#include "kernel_util.h"
#include "matmul.h"
#include "softmax.h"

namespace vkt {
namespace {

constexpr std::uint32_t kGolden = 0x9e3779b9u;  // dropout.cpp's key multiplier

}  // namespace

Tensor masked_softmax(const Tensor& scores, float scale, bool causal, const Tensor& mask) {
  if (!scores.valid()) throw Error("masked_softmax: the scores tensor is empty");
  const Shape& s = scores.shape();
  const std::string what = fmt::format("masked_softmax('{}' {})", scores.name(), s.str());
  if (!std::isfinite(scale) || scale == 0.0f) {
    throw Error(fmt::format("{}: scale is {}; give a finite nonzero factor", what, scale));
  }
  if (causal && s.rank() < 2) {
    throw Error(fmt::format("{}: a causal mask needs [..., queries, keys] scores", what));
  }
  // Without a mask tensor the scale and the causal mask are the softmax
  // kernel's own (one pass over the scores, one back); a mask tensor takes a
  // select after the scale.
  if (!mask.valid()) return ops_detail::scaled_causal_softmax(scores, scale, causal);
  Graph& g = scores.graph();
  Tensor x = scale == 1.0f ? scores : scores * scale;
  const Tensor masked = g.scalar(-INFINITY);
  if (causal) {
    const std::int64_t tq = s[s.rank() - 2], tk = s[s.rank() - 1];
    std::vector<float> keep(static_cast<std::size_t>(tq * tk));
    for (std::int64_t i = 0; i < tq; ++i) {
      for (std::int64_t j = 0; j < tk; ++j) keep[i * tk + j] = j <= i + tk - tq ? 1.0f : 0.0f;
    }
    x = where(g.constant(Shape{tq, tk}, keep), x, masked);
  }
  if (mask.valid()) x = where(mask, x, masked);
  return softmax(x, -1);
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options) {
  for (const Tensor* t : {&q, &k, &v}) {
    if (!t->valid()) throw Error("scaled_dot_product_attention: an input tensor is empty");
  }
  const Shape& sq = q.shape();
  const std::string what =
      fmt::format("scaled_dot_product_attention('{}' {}, '{}' {}, '{}' {})", q.name(), sq.str(),
                  k.name(), k.shape().str(), v.name(), v.shape().str());
  if (sq.rank() < 3 || k.shape().rank() != sq.rank() || v.shape().rank() != sq.rank()) {
    throw Error(
        fmt::format("{}: q, k and v need the same rank, 3 ([B, T, D]) or 4 ([B, H, T, D])", what));
  }
  if (k.shape() != v.shape()) {
    throw Error(fmt::format("{}: k and v need the same shape", what));
  }
  for (int i = 0; i < sq.rank(); ++i) {
    if (i != sq.rank() - 2 && sq[i] != k.shape()[i]) {
      throw Error(fmt::format(
          "{}: q and k differ in dimension {} ({} and {}); they may differ only in their "
          "number of positions (dimension {})",
          what, i, sq[i], k.shape()[i], sq.rank() - 2));
    }
  }
  for (const Tensor* t : {&q, &k, &v}) {
    if (t->dtype() != DType::F32) {
      throw Error(fmt::format("{}: '{}' {}; attention takes f32", what, t->name(),
                              ops_detail::not_f32(*t)));
    }
  }
  const std::int64_t d = sq[sq.rank() - 1];
  const float scale = options.scale != 0.0f
                          ? options.scale
                          : static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  if (!(options.dropout >= 0.0f && options.dropout < 1.0f)) {
    throw Error(
        fmt::format("{}: dropout {} is outside [0, 1); it is the fraction of "
                    "probabilities dropped (0 keeps all)",
                    what, options.dropout));
  }
  Graph& g = q.graph();
  // The dropout mask's key: this call's place in its graph, the same in every
  // graph built by the same code, whichever kernel runs.
  const std::uint32_t key = static_cast<std::uint32_t>(g.nodes().size()) * kGolden;
  // Auto leaves CPU devices the composed path: there shared memory is plain
  // memory behind scalar loads and each barrier a coroutine switch
  // (LAVAPIPE.md), which made the fused step 3x slower than the composed one
  // on lavapipe (vkt-bench-gpt, docs/PERFORMANCE.md).
  const bool cpu = g.device().info().type == DeviceType::Cpu;
  if (options.kernel == AttentionKernel::Fused ||
      (options.kernel == AttentionKernel::Auto && !cpu)) {
    const std::optional<std::uint32_t> tile = ops_detail::fused_attention_tile(g.device(), d);
    const std::int64_t matrices = sq.elements() / (sq[sq.rank() - 2] * d);
    const bool fits = tile && matrices <= 65535 && sq[sq.rank() - 2] <= 65535 * 16;
    if (fits) {
      const ops_detail::FusedAttentionParams fused{
          .causal = options.causal, .scale = scale, .dropout = options.dropout, .key = key};
      // The graph's precision policy: q, k and v rounded to the half type and
      // the output rounded once, f32 inside (FlashAttention's numbers in
      // half, but for its rounding of the probabilities). The composed path
      // below takes the policy through its two products. Where products take
      // half tensors (GPUs) q, k and v are stored in half, which the kernels
      // widen as they read them, and the result is written in half (the
      // backward pass keeps all four at half the bytes); the f32 result is
      // that tensor widened, which the next product's cast undoes. On the
      // texel kernel's devices they are rounded in place.
      if (const DType half = compute_dtype(g.options().precision); is_half(half)) {
        const Tensor y = ops_detail::fused_attention(policy_operand(q), policy_operand(k),
                                                     policy_operand(v), fused, *tile);
        return is_half(y.dtype()) ? cast(y, DType::F32) : round_to_half(y, half);
      }
      return ops_detail::fused_attention(q, k, v, fused, *tile);
    }
    if (options.kernel == AttentionKernel::Fused) {
      throw Error(fmt::format(
          "{}: the fused kernels do not fit on {} (head dimension {}, {} bytes of shared "
          "memory); use AttentionKernel::Auto or Composed",
          what, g.device().info().name, d, g.device().info().max_shared_memory_bytes));
    }
  }
  const Tensor scores = matmul(q, k, false, true);  // [..., Tq, Tk]
  Tensor p = masked_softmax(scores, scale, options.causal);
  if (options.dropout > 0.0f) {
    // dropout's key is its node's place mixed with the offset: this offset makes it `key`.
    p = dropout(p, options.dropout, key ^ static_cast<std::uint32_t>(g.nodes().size()) * kGolden);
  }
  return matmul(p, v);
}

}  // namespace vkt
