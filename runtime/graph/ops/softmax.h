#pragma once
// Softmax and friends along one axis: softmax, log_softmax, argmax, one_hot.

#include <cstdint>

#include "../tensor.h"

namespace vkt {

/// y = exp(x - m) / sum(exp(x - m), axis) with m = max(x, axis): the maximum is
/// subtracted first, so logits of any size give no overflow. Any axis
/// (negative counts from the end). Gradient: dx = y * (dy - sum(dy * y, axis)),
/// one backward kernel.
Tensor softmax(const Tensor& x, int axis = -1);

/// y = x - m - log(sum(exp(x - m), axis)) with m = max(x, axis), exact where
/// softmax underflows to 0. Gradient: dx = dy - exp(y) * sum(dy, axis).
Tensor log_softmax(const Tensor& x, int axis = -1);

/// The index of the largest element along `axis` (the first one on ties), as
/// i32, with that axis removed: [N, C] -> [N]. No gradient.
Tensor argmax(const Tensor& x, int axis = -1);

/// indices (i32, rank 0-3) -> f32 with a new last axis of size `depth`:
/// out[..., j] = (indices[...] == j) ? on : off. An index outside [0, depth)
/// gives a row of `off` only, as in TensorFlow. No gradient.
Tensor one_hot(const Tensor& indices, std::int64_t depth, float on = 1.0f, float off = 0.0f);

namespace ops_detail {

/// softmax(scale * scores) over the last axis in one kernel, key j of query i
/// masked (0) when `causal` and j > i + Tk - Tq, for scores [..., Tq, Tk]
/// (masked_softmax without a mask tensor). Gradient in one kernel too.
Tensor scaled_causal_softmax(const Tensor& scores, float scale, bool causal);

}  // namespace ops_detail

}  // namespace vkt
