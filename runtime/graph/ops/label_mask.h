#pragma once
// The ignored labels of a classification loss (shaders/label_mask.comp).

#include <cstdint>
#include <utility>

#include "../tensor.h"

namespace vkt::ops_detail {

/// For i32 `labels`: the f32 weights (0 where a label equals `ignore`, else 1)
/// and the labels with `ignore` replaced by 0. Neither takes a gradient.
std::pair<Tensor, Tensor> ignore_labels(const Tensor& labels, std::int32_t ignore);

}  // namespace vkt::ops_detail
