#pragma once
// The second half of a split-K product (matmul_tiles.h's KSplit): its partial
// sums, one copy of the output per slice of k, summed in slice order.

#include <functional>
#include <span>
#include <vector>

#include "../op.h"
#include "../tensor.h"

namespace vkt::ops_detail {

/// The gradients of a split product with respect to its operands, given dy.
using SliceGradients =
    std::function<std::vector<Gradient>(std::span<const Tensor> operands, const Tensor& dy)>;

/// partials [slices, ...shape] summed over the slices, in slice order, to
/// `shape`. `operands` are the product's inputs: the node names them so that
/// its gradient reaches them (through `gradients`), not the partial sums.
Tensor sum_slices(const Tensor& partials, std::vector<Tensor> operands, const Shape& shape,
                  SliceGradients gradients);

}  // namespace vkt::ops_detail
