// conv2d: the forward op, and the checks that make a ConvGeometry safe to
// dispatch (the gradients are in conv_backprop.cpp, the kernels in conv_gemm.cpp).
#include "conv.h"

#include <fmt/format.h>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "cast.h"
#include "conv_gemm.h"
#include "kernel_util.h"

namespace vkt {
namespace {

using conv_detail::ConvGemm;
using conv_detail::ConvGeometry;

// The shaders index elements with int32 and dispatch one workgroup row per 16
// (texel) or 64 (tiled) GEMM rows, in at most 65535 workgroups, the least every
// Vulkan device allows.
constexpr std::int64_t kMaxElements = (std::int64_t{1} << 31) - 1;
constexpr std::int64_t kMaxGemmRows = 65535 * 16;
constexpr std::int64_t kMaxGroups = 65535;
// Padded extents stay below 2^30, so window arithmetic in int32 cannot overflow.
constexpr std::int64_t kMaxPadded = std::int64_t{1} << 30;

class Conv2dOp final : public Op {
 public:
  explicit Conv2dOp(const ConvGeometry& g) : g_(g) {}
  std::string type() const override { return "conv2d"; }
  /// x and the filter may be stored in half (the precision policy's, where
  /// products take half tensors); conv2d() itself takes f32.
  bool takes_half() const override { return true; }

  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    conv_detail::record_conv_gemm(ctx, ConvGemm::Forward, g_, ctx.buffer(in[0]), ctx.buffer(in[1]),
                                  ctx.buffer(out), {}, {in[0].dtype(), in[1].dtype()});
  }

  std::vector<Gradient> gradient(std::span<const Tensor> in, const Tensor&,
                                 const Tensor& dy) const override {
    const std::optional<Tensor> dx = conv_detail::conv2d_input_gradient_as_forward(dy, in[1], g_);
    // f32 sums; a half input's gradient is of its type (rounded once), so the
    // cast before it passes on what round_to_half's gradient would.
    return {
        Gradient{cast(dx ? *dx : conv_detail::conv2d_backprop_input(dy, in[1], g_), in[0].dtype())},
        Gradient{cast(conv_detail::conv2d_backprop_filter(in[0], dy, g_), in[1].dtype())}};
  }

 private:
  ConvGeometry g_;
};

void check_inputs(const Tensor& x, const Tensor& filter, const std::string& what) {
  if (!x.valid() || !filter.valid()) throw Error("conv2d: an input tensor is empty");
  if (&x.graph() != &filter.graph()) {
    throw Error(
        fmt::format("{}: '{}' and '{}' belong to different graphs (devices); copy one across first",
                    what, x.name(), filter.name()));
  }
  for (const Tensor* t : {&x, &filter}) {
    if (t->dtype() != DType::F32) {
      throw Error(fmt::format("{}: input '{}' {}; conv2d takes f32", what, t->name(),
                              ops_detail::not_f32(*t)));
    }
  }
  if (x.shape().rank() != 4) {
    throw Error(fmt::format(
        "{}: x must be images [batch, height, width, channels] (rank 4), got {}; reshape it "
        "first (a single image needs a batch dimension of 1)",
        what, x.shape().str()));
  }
  if (filter.shape().rank() != 4) {
    throw Error(fmt::format(
        "{}: the filter must be [height, width, channels / groups, filters] (rank 4), got {}", what,
        filter.shape().str()));
  }
}

void check_channels(const Shape& xs, const Shape& fs, std::int64_t groups,
                    const std::string& what) {
  if (groups < 1 || groups > kMaxGroups) {
    throw Error(
        fmt::format("{}: groups is {}; it must be between 1 and {}", what, groups, kMaxGroups));
  }
  if (xs[3] % groups != 0) {
    throw Error(
        fmt::format("{}: groups = {} does not divide the {} channels of x {}; use a "
                    "number of groups that divides them",
                    what, groups, xs[3], xs.str()));
  }
  if (fs[2] != xs[3] / groups) {  // divided, not multiplied: no overflow
    throw Error(fmt::format(
        "{}: channel mismatch: x {} has {} channels, so with groups = {} the filter must have "
        "{} input channels (its dimension 2), but the filter {} has {}",
        what, xs.str(), xs[3], groups, xs[3] / groups, fs.str(), fs[2]));
  }
  if (fs[3] % groups != 0) {
    throw Error(
        fmt::format("{}: groups = {} does not divide the {} filters of {} (its last "
                    "dimension); make the filters a multiple of groups",
                    what, groups, fs[3], fs.str()));
  }
}

// a * b, or an error when it passes `limit`.
std::int64_t checked_product(std::int64_t a, std::int64_t b, std::int64_t limit,
                             const std::string& what, const char* name) {
  if (a > limit / b) {
    throw Error(
        fmt::format("{}: {} would pass {}; use a smaller batch or image", what, name, limit));
  }
  return a * b;
}

void check_sizes(const ConvGeometry& g, const WindowPlan& plan, const std::string& what) {
  if (g.in_h + plan.pad_top + plan.pad_bottom > kMaxPadded ||
      g.in_w + plan.pad_left + plan.pad_right > kMaxPadded) {
    throw Error(fmt::format("{}: the padded image passes {} rows or columns", what, kMaxPadded));
  }
  const std::int64_t in_pixels =
      checked_product(checked_product(g.batch, g.in_h, kMaxElements, what, "the input pixels"),
                      g.in_w, kMaxElements, what, "the input pixels");
  const std::int64_t out_pixels =
      checked_product(checked_product(g.batch, g.out_h, kMaxElements, what, "the output pixels"),
                      g.out_w, kMaxElements, what, "the output pixels");
  checked_product(in_pixels, g.in_c, kMaxElements, what, "the elements of x");
  checked_product(out_pixels, g.out_c, kMaxElements, what, "the elements of the output");
  const std::int64_t taps = checked_product(g.k_h, g.k_w, kMaxElements, what, "the filter taps");
  checked_product(checked_product(taps, g.group_c(), kMaxElements, what, "the filter's elements"),
                  g.out_c, kMaxElements, what, "the filter's elements");
  for (const std::int64_t rows : {in_pixels, out_pixels, taps * g.group_c()}) {
    if (rows > kMaxGemmRows) {
      throw Error(fmt::format(
          "{}: a GEMM of {} rows (pixels of the batch, or filter taps x channels) passes the {} "
          "one dispatch covers; split the batch",
          what, rows, kMaxGemmRows));
    }
  }
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& filter, const Conv2dOptions& options) {
  const std::string what = x.valid() && filter.valid()
                               ? fmt::format("conv2d('{}', '{}')", x.name(), filter.name())
                               : "conv2d";
  check_inputs(x, filter, what);
  const Shape& xs = x.shape();
  const Shape& fs = filter.shape();
  check_channels(xs, fs, options.groups, what);
  const Window2d window{.size = {fs[0], fs[1]},
                        .strides = options.strides,
                        .dilations = options.dilations,
                        .padding = options.padding,
                        .explicit_padding = options.explicit_padding};
  const WindowPlan plan = plan_window(window, xs[1], xs[2], what);
  const ConvGeometry g{.batch = xs[0],
                       .in_h = xs[1],
                       .in_w = xs[2],
                       .in_c = xs[3],
                       .out_h = plan.out_h,
                       .out_w = plan.out_w,
                       .out_c = fs[3],
                       .k_h = fs[0],
                       .k_w = fs[1],
                       .groups = options.groups,
                       .stride_h = options.strides[0],
                       .stride_w = options.strides[1],
                       .dil_h = options.dilations[0],
                       .dil_w = options.dilations[1],
                       .pad_top = plan.pad_top,
                       .pad_left = plan.pad_left};
  check_sizes(g, plan, what);
  const Shape out{g.batch, g.out_h, g.out_w, g.out_c};
  // The graph's precision policy: the half conv's numbers (operands rounded
  // to the half type, f32 sums, the output rounded once), on the f32 kernels.
  // Through round_to_half's gradient, dy and both gradients are rounded too.
  // Where products take half tensors (GPUs) x and the filter are stored in
  // half instead, which the tiled kernels widen as they read them: the same
  // bits, and the backward pass keeps x at half the bytes.
  if (const DType half = compute_dtype(x.graph().options().precision); is_half(half)) {
    const Tensor y = x.graph().add_node(std::make_unique<Conv2dOp>(g),
                                        {policy_operand(x), policy_operand(filter)}, out);
    return round_to_half(y, half);
  }
  return x.graph().add_node(std::make_unique<Conv2dOp>(g), {x, filter}, out);
}

}  // namespace vkt
