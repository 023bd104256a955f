#pragma once
// Ops that change a tensor's shape or cut it.

#include <cstdint>
#include <utility>
#include <vector>

#include "../tensor.h"

namespace vkt {

/// The same elements with another shape (same element count). Shares memory.
Tensor reshape(const Tensor& x, const Shape& shape);

/// [N, ...] -> [N, product of the rest] (rank 1 gives [N, 1]): a reshape, no copy.
///
///   vkt::Tensor h = vkt::flatten(pooled);  // [N, 7, 7, 64] -> [N, 3136]
Tensor flatten(const Tensor& x);

/// x with its axes reordered: output axis k is x's axis perm[k] (negative
/// counts from the end; each axis once). f32 or i32, or f16 and bf16 where the
/// last axis stays last and is even (whole words move). A copy, except where only
/// axes of size 1 move (then a reshape, no copy). The gradient is the inverse
/// permutation of dy.
///
///   vkt::Tensor heads = vkt::permute(qkv, {0, 2, 1, 3});  // [B, T, H, D] -> [B, H, T, D]
Tensor permute(const Tensor& x, const std::vector<int>& perm);

/// x with two axes swapped (by default the last two: a batch of matrices transposed).
///
///   vkt::Tensor kt = vkt::transpose(k);  // [B, H, T, D] -> [B, H, D, T]
Tensor transpose(const Tensor& x, int axis_a = -2, int axis_b = -1);

/// `x` (f32) with paddings[d].first entries of `value` before and
/// paddings[d].second after it along each dimension d (one pair per dimension,
/// none negative). The gradient is the block of dy where x lies.
///
///   vkt::Tensor y = vkt::pad(images, {{0, 0}, {2, 2}, {2, 2}, {0, 0}});  // 28x28 -> 32x32
Tensor pad(const Tensor& x, const std::vector<std::pair<std::int64_t, std::int64_t>>& paddings,
           float value = 0.0f);

/// The tensors joined along `axis` (negative counts from the end); every other
/// dimension and the dtype must agree. f32 or i32. One copy of each element, in
/// one dispatch per 4 inputs.
///
///   vkt::Tensor xy = vkt::concat({x, y}, -1);   // [N, 3] and [N, 5] -> [N, 8]
Tensor concat(const std::vector<Tensor>& xs, int axis);

/// `x` cut along `axis` into consecutive pieces of the given sizes, which must
/// add up to x's size there. The inverse of concat; along axis 0 the pieces
/// are row slices (see slice_rows).
std::vector<Tensor> split(const Tensor& x, const std::vector<std::int64_t>& sizes, int axis);

/// Rows [begin, begin + count) of x along dimension 0. Rows are contiguous, so
/// this is a view on x's memory (no copy) whenever the first row starts on the
/// device's buffer binding alignment (tensor_alignment); otherwise it is a copy.
Tensor slice_rows(const Tensor& x, std::int64_t begin, std::int64_t count);

/// Entries [begin, begin + size) of x along `axis` (a copy unless axis is 0).
Tensor slice_axis(const Tensor& x, int axis, std::int64_t begin, std::int64_t size);

/// A tensor of `shape`, zero everywhere except the block starting at `begin`
/// along `axis`, which holds x (x's shape is `shape` except along `axis`). The
/// gradient of a slice.
Tensor pad_axis(const Tensor& x, const Shape& shape, int axis, std::int64_t begin);

/// For autodiff: the dense gradient parts of one tensor, in contribution order,
/// with the zero-padded blocks (pad_axis, concat) that cover disjoint regions
/// of the same shape merged into one op at the place of the first. Their sum
/// is the same, but a k-way split's gradient then costs one O(n) op instead of
/// k pads and k - 1 additions of n elements each.
std::vector<Tensor> merge_padded(const std::vector<Tensor>& parts);

}  // namespace vkt
