// The gradients of conv2d, each an op of its own whose kernel is an implicit
// GEMM (conv_gemm.cpp): conv2d_backprop_input and conv2d_backprop_filter.
#include <fmt/format.h>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "conv_gemm.h"
#include "sum_slices.h"

namespace vkt::conv_detail {
namespace {

[[noreturn]] void no_second_derivative(const char* op) {
  throw Error(fmt::format(
      "{}: second derivatives of conv2d are not implemented; take gradients of a loss whose "
      "path to the variables does not pass through a conv2d gradient",
      op));
}

class Conv2dBackpropInputOp final : public Op {
 public:
  explicit Conv2dBackpropInputOp(const ConvGeometry& g) : g_(g) {}
  std::string type() const override { return "conv2d_backprop_input"; }
  /// The filter may be stored in half (the precision policy's).
  bool takes_half() const override { return true; }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    record_conv_gemm(ctx, ConvGemm::BackpropInput, g_, ctx.buffer(in[0]), ctx.buffer(in[1]),
                     ctx.buffer(out), {}, {in[0].dtype(), in[1].dtype()});
  }
  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor&,
                                 const Tensor&) const override {
    no_second_derivative("conv2d_backprop_input");
  }

 private:
  ConvGeometry g_;
};

/// The filter gradient; with a KSplit, its partial sums [slices, filter...],
/// which sum_slices adds up.
class Conv2dBackpropFilterOp final : public Op {
 public:
  explicit Conv2dBackpropFilterOp(const ConvGeometry& g, KSplit split = {})
      : g_(g), split_(split) {}
  std::string type() const override {
    return split_.split() ? "conv2d_backprop_filter_split_k" : "conv2d_backprop_filter";
  }
  /// x may be stored in half (the precision policy's).
  bool takes_half() const override { return true; }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    record_conv_gemm(ctx, ConvGemm::BackpropFilter, g_, ctx.buffer(in[0]), ctx.buffer(in[1]),
                     ctx.buffer(out), split_, {in[0].dtype(), in[1].dtype()});
  }
  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor&,
                                 const Tensor&) const override {
    no_second_derivative("conv2d_backprop_filter");
  }

 private:
  ConvGeometry g_;
  KSplit split_;
};

}  // namespace

// conv2d has checked the geometry; these only build the nodes.
Tensor conv2d_backprop_input(const Tensor& dy, const Tensor& filter, const ConvGeometry& g) {
  return dy.graph().add_node(std::make_unique<Conv2dBackpropInputOp>(g), {dy, filter},
                             Shape{g.batch, g.in_h, g.in_w, g.in_c});
}

Tensor conv2d_backprop_filter(const Tensor& x, const Tensor& dy, const ConvGeometry& g) {
  Graph& graph = x.graph();
  const Shape filter{g.k_h, g.k_w, g.group_c(), g.out_c};
  // A filter gradient sums over every pixel of the batch into a small filter:
  // split-K gives it the whole device (the tiled kernel; texel: none).
  if (const KSplit split = split_conv_gemm(graph.device(), ConvGemm::BackpropFilter, g);
      split.split()) {
    const Tensor partials =
        graph.add_node(std::make_unique<Conv2dBackpropFilterOp>(g, split), {x, dy},
                       Shape{split.slices, g.k_h * g.k_w, g.group_c(), g.out_c});
    return ops_detail::sum_slices(
        partials, {x, dy}, filter,
        [](std::span<const Tensor>, const Tensor&) -> std::vector<Gradient> {
          no_second_derivative("conv2d_backprop_filter");
        });
  }
  return graph.add_node(std::make_unique<Conv2dBackpropFilterOp>(g), {x, dy}, filter);
}

}  // namespace vkt::conv_detail
