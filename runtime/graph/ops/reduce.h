#pragma once
// Reductions over all elements or one axis.

#include "../tensor.h"

namespace vkt {

/// Sum, mean or maximum of every element: a scalar.
Tensor reduce_sum(const Tensor& x);
Tensor reduce_mean(const Tensor& x);
Tensor reduce_max(const Tensor& x);
/// The same along one axis (negative counts from the end); `keepdims` keeps
/// the reduced axis with size 1.
Tensor reduce_sum(const Tensor& x, int axis, bool keepdims = false);
Tensor reduce_mean(const Tensor& x, int axis, bool keepdims = false);
Tensor reduce_max(const Tensor& x, int axis, bool keepdims = false);

}  // namespace vkt
