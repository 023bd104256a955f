#pragma once
// Key and value heads repeated for grouped-query attention.

#include <cstdint>

#include "../tensor.h"

namespace vkt {

/// Each of x's Hkv heads repeated n_rep times in a row (Hugging Face's
/// repeat_kv): x [B, Hkv, T, D] (f32) gives [B, Hkv * n_rep, T, D], head h of
/// the result being head h / n_rep of x, so grouped-query attention's keys and
/// values meet the query heads of their group. The gradient sums each head's
/// n_rep copies. n_rep 1 returns x itself. Composed of reshape and
/// broadcast_to (their gradients: sum_to over the copies).
///
///   vkt::Tensor k_all = vkt::repeat_kv(k, n_heads / n_kv_heads);  // k [B, Hkv, T, D]
Tensor repeat_kv(const Tensor& x, std::int64_t n_rep);

}  // namespace vkt
