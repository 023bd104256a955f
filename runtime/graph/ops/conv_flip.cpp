// conv2d's input gradient at stride 1 as a forward convolution of dy with the
// flipped filter (shaders/conv_filter_flip.comp): the forward kernel finds each
// operand element with adds where the backprop kernel's transposed view tests
// every tap, 3-4x faster on lavapipe at the MNIST CNN's shapes.
#include <fmt/format.h>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "cast.h"
#include "conv.h"
#include "conv_gemm.h"
#include "kernel_util.h"

namespace vkt::conv_detail {
namespace {

struct FlipPush {
  std::uint32_t n, k_h, k_w, group_c, group_o, in_c, out_c;
};

class FlipFilterOp final : public Op {
 public:
  explicit FlipFilterOp(const ConvGeometry& g) : g_(g) {}
  std::string type() const override { return "conv2d_flip_filter"; }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const std::int64_t n = out.shape().elements();
    const Kernel& kernel = ctx.device().kernel(
        {.shader = "conv_filter_flip", .local_size = {ops_detail::kLocalSize, 1, 1}});
    const auto u = [](std::int64_t v) { return static_cast<std::uint32_t>(v); };
    ops_detail::dispatch_1d(ctx, kernel, {ctx.buffer(in[0]), ctx.buffer(out)},
                            FlipPush{u(n), u(g_.k_h), u(g_.k_w), u(g_.group_c()), u(g_.group_o()),
                                     u(g_.in_c), u(g_.out_c)},
                            n);
  }
  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor&,
                                 const Tensor&) const override {
    throw Error(
        "conv2d_flip_filter: second derivatives of conv2d are not implemented; take gradients "
        "of a loss whose path to the variables does not pass through a conv2d gradient");
  }

 private:
  ConvGeometry g_;
};

}  // namespace

std::optional<Tensor> conv2d_input_gradient_as_forward(const Tensor& dy, const Tensor& filter,
                                                       const ConvGeometry& g) {
  if (g.stride_h != 1 || g.stride_w != 1) return std::nullopt;
  // At stride 1, out = in + pad_top + pad_bottom - span + 1 per dimension;
  // dy padded by span - 1 - pad on each side gives back the input's size.
  const std::int64_t span_h = (g.k_h - 1) * g.dil_h + 1, span_w = (g.k_w - 1) * g.dil_w + 1;
  const std::int64_t top = span_h - 1 - g.pad_top, left = span_w - 1 - g.pad_left;
  const std::int64_t bottom = g.in_h - g.out_h + g.pad_top, right = g.in_w - g.out_w + g.pad_left;
  if (top < 0 || left < 0 || bottom < 0 || right < 0)
    return std::nullopt;  // padding past the window
  // The flip kernel reads f32: a filter stored in half is widened first (exact).
  const Tensor f32_filter = filter.dtype() == DType::F32 ? filter : cast(filter, DType::F32);
  const Tensor flipped = dy.graph().add_node(std::make_unique<FlipFilterOp>(g), {f32_filter},
                                             Shape{g.k_h, g.k_w, g.group_o(), g.in_c});
  return conv2d(dy, flipped,
                {.padding = Padding::Explicit,
                 .explicit_padding = {top, bottom, left, right},
                 .dilations = {g.dil_h, g.dil_w},
                 .groups = g.groups});
}

}  // namespace vkt::conv_detail
