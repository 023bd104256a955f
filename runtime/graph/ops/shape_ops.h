#pragma once
// Ops that change a tensor's shape or cut it.

#include "../tensor.h"

namespace vkt {

/// The same elements with another shape (same element count). Shares memory.
Tensor reshape(const Tensor& x, const Shape& shape);

}  // namespace vkt
