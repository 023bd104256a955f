// Window geometry shared by conv2d and pooling (padding.h).
#include "padding.h"

#include <fmt/format.h>

#include <algorithm>

#include "../../vulkan/error.h"

namespace vkt {
namespace {

// Dimensions are checked against this before any product is formed, so the
// arithmetic below never overflows.
constexpr std::int64_t kMaxExtent = std::int64_t{1} << 30;

struct Axis {
  std::int64_t out = 0, before = 0, after = 0;
};

Axis plan_axis(std::int64_t in, std::int64_t size, std::int64_t stride, std::int64_t dilation,
               Padding padding, std::int64_t before, std::int64_t after, const char* axis,
               const std::string& what) {
  const std::int64_t span = (size - 1) * dilation + 1;  // the dilated window
  Axis a;
  switch (padding) {
    case Padding::Valid:
      break;
    case Padding::Same: {
      const std::int64_t out = (in + stride - 1) / stride;
      const std::int64_t total = std::max<std::int64_t>((out - 1) * stride + span - in, 0);
      a.before = total / 2;
      a.after = total - a.before;
      break;
    }
    case Padding::Explicit:
      a.before = before;
      a.after = after;
      break;
  }
  const std::int64_t padded = in + a.before + a.after;
  if (padded < span) {
    throw Error(fmt::format(
        "{}: the {} window spans {} (size {}, dilation {}) but the input has only {}{}; use "
        "a smaller window or dilation, or pad the input",
        what, axis, span, size, dilation, in,
        padded == in ? "" : fmt::format(" ({} padded)", padded)));
  }
  a.out = (padded - span) / stride + 1;
  return a;
}

}  // namespace

WindowPlan plan_window(const Window2d& window, std::int64_t h, std::int64_t w,
                       const std::string& what) {
  const auto check = [&](std::int64_t v, std::int64_t low, const char* name) {
    if (v < low || v > kMaxExtent) {
      throw Error(fmt::format("{}: {} is {}; it must be between {} and {}", what, name, v, low,
                              kMaxExtent));
    }
  };
  check(h, 1, "the input height");
  check(w, 1, "the input width");
  check(window.size[0], 1, "the window height");
  check(window.size[1], 1, "the window width");
  check(window.strides[0], 1, "the row stride");
  check(window.strides[1], 1, "the column stride");
  check(window.dilations[0], 1, "the row dilation");
  check(window.dilations[1], 1, "the column dilation");
  if (window.padding == Padding::Explicit) {
    const char* names[] = {"the top padding", "the bottom padding", "the left padding",
                           "the right padding"};
    for (int i = 0; i < 4; ++i) check(window.explicit_padding[i], 0, names[i]);
  }
  const auto& p = window.explicit_padding;
  const Axis rows = plan_axis(h, window.size[0], window.strides[0], window.dilations[0],
                              window.padding, p[0], p[1], "row", what);
  const Axis cols = plan_axis(w, window.size[1], window.strides[1], window.dilations[1],
                              window.padding, p[2], p[3], "column", what);
  return WindowPlan{rows.out, cols.out, rows.before, cols.before, rows.after, cols.after};
}

}  // namespace vkt
