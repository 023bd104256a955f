#pragma once
// 2-D convolution over NHWC images with HWIO filters, and its gradients.

#include <array>
#include <cstdint>

#include "../tensor.h"
#include "padding.h"

namespace vkt {

/// How conv2d slides its filter: strides and dilations (rows, columns), the
/// padding (Padding::Explicit reads explicit_padding: top, bottom, left,
/// right), and groups: the input channels and the filters split into `groups`
/// equal parts, each part of the filters seeing its part of the channels
/// (groups == channels is a depthwise convolution).
struct Conv2dOptions {
  std::array<std::int64_t, 2> strides{1, 1};
  Padding padding = Padding::Valid;
  std::array<std::int64_t, 4> explicit_padding{0, 0, 0, 0};  // top, bottom, left, right
  std::array<std::int64_t, 2> dilations{1, 1};
  std::int64_t groups = 1;
};

/// x [N, H, W, C] f32, filter [KH, KW, C / groups, O] (O a multiple of groups)
/// -> [N, OH, OW, O], OH and OW as padding.h's plan_window gives them. It runs
/// as an implicit GEMM on matmul's kernels (the image's windows are read in
/// place, never copied out); both gradients are such GEMMs too. Shapes, types,
/// graphs and window sizes are checked when the graph is built: a mistake is a
/// vkt::Error naming the tensors, their shapes and the fix.
///
///   vkt::Tensor x = g.input("images", {64, 28, 28, 1});
///   vkt::Tensor w = g.variable("conv1/kernel", {5, 5, 1, 32}, vkt::Initializer::glorot_uniform());
///   vkt::Tensor y = vkt::conv2d(x, w, {.padding = vkt::Padding::Same});  // [64, 28, 28, 32]
///   vkt::Tensor z = vkt::conv2d(y, g.variable("dw", {3, 3, 1, 32}),     // depthwise, stride 2
///                               {.strides = {2, 2}, .padding = vkt::Padding::Same, .groups = 32});
Tensor conv2d(const Tensor& x, const Tensor& filter, const Conv2dOptions& options = {});

}  // namespace vkt
