#pragma once
// The spatial padding that conv2d and the pooling ops share (NHWC images).

#include <array>
#include <cstdint>
#include <string>

namespace vkt {

/// How a window op pads its input. Valid: no padding, windows lie inside the
/// image. Same: output size ceil(input / stride), the padding split as
/// TensorFlow does (the extra row or column at the bottom or right). Explicit:
/// the rows and columns given in Window2d::explicit_padding.
enum class Padding { Valid, Same, Explicit };

/// A 2-D window's geometry over the H and W dimensions of an NHWC tensor.
struct Window2d {
  std::array<std::int64_t, 2> size{1, 1};     ///< window rows, columns (filter KH, KW)
  std::array<std::int64_t, 2> strides{1, 1};  ///< rows, columns
  std::array<std::int64_t, 2> dilations{1, 1};
  Padding padding = Padding::Valid;
  /// top, bottom, left, right; used with Padding::Explicit only.
  std::array<std::int64_t, 4> explicit_padding{0, 0, 0, 0};
};

/// Where a window op's output lies: its size and the padding before each dimension.
struct WindowPlan {
  std::int64_t out_h = 0, out_w = 0;
  std::int64_t pad_top = 0, pad_left = 0;
  std::int64_t pad_bottom = 0, pad_right = 0;
};

/// The output size and padding of `window` over an h x w image. Throws
/// vkt::Error naming `what` when a stride, dilation or window size is below 1,
/// an explicit padding is negative, or the (padded) image is smaller than the
/// dilated window.
WindowPlan plan_window(const Window2d& window, std::int64_t h, std::int64_t w,
                       const std::string& what);

}  // namespace vkt
