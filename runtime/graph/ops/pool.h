#pragma once
// 2-D pooling over NHWC images: max, average, and global average.

#include <array>
#include <cstdint>

#include "../tensor.h"
#include "padding.h"

namespace vkt {

/// A pooling window's geometry. Explicit padding must be smaller than the
/// window along its axis, so every window holds at least one image cell (Same
/// padding always does).
struct Pool2dOptions {
  std::array<std::int64_t, 2> window{2, 2};   ///< rows, columns
  std::array<std::int64_t, 2> strides{2, 2};  ///< rows, columns
  Padding padding = Padding::Valid;
  std::array<std::int64_t, 4> explicit_padding{0, 0, 0, 0};  ///< top, bottom, left, right
};

/// x [N, H, W, C] (f32) -> [N, OH, OW, C], the maximum of each window (OH, OW
/// as plan_window gives them). The gradient goes to each window's maximum, ties
/// to the first in row-major window order; padding is never the maximum. Both
/// directions are one kernel each; the backward one gathers per input cell
/// (no atomics), so it gives the same bits on every run.
///
///   vkt::Tensor p = vkt::max_pool2d(x);  // 2x2 windows, stride 2: [N, 28, 28, C] -> [N, 14, 14,
///   C] vkt::Tensor q = vkt::max_pool2d(x, {.window = {3, 3}, .strides = {2, 2},
///                                       .padding = vkt::Padding::Same});
Tensor max_pool2d(const Tensor& x, const Pool2dOptions& options = {});

/// The mean of each window over the cells inside the image (padding is not
/// counted, as TensorFlow does). Shapes as max_pool2d.
Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& options = {});

/// [N, H, W, C] -> [N, C]: the mean over H and W.
///
///   vkt::Tensor features = vkt::global_avg_pool(conv_out);  // [N, 7, 7, 64] -> [N, 64]
Tensor global_avg_pool(const Tensor& x);

}  // namespace vkt
