// where (shaders/where.comp): a broadcasting select. Each branch's gradient is
// dy where that branch was taken, 0 elsewhere, summed back to its shape.
#include <fmt/format.h>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "elementwise.h"
#include "fold_axes.h"
#include "kernel_util.h"

namespace vkt {
namespace {

struct WherePush {
  std::uint32_t n, pad0 = 0, pad1 = 0, pad2 = 0;
  std::array<std::uint32_t, 4> dims, c_strides, a_strides, b_strides;
};

class WhereOp final : public Op {
 public:
  std::string type() const override { return "where"; }

  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const Shape& shape = out.shape();
    const std::array<Shape, 3> operands{in[0].shape(), in[1].shape(), in[2].shape()};
    const auto fold = ops_detail::fold_broadcast_or_throw(shape, operands, type());
    WherePush push{};
    push.n = static_cast<std::uint32_t>(shape.elements());
    push.dims = fold.dims;
    push.c_strides = fold.strides[0];
    push.a_strides = fold.strides[1];
    push.b_strides = fold.strides[2];
    ops_detail::dispatch_1d(
        ctx, ctx.device().kernel({.shader = "where", .local_size = {ops_detail::kLocalSize, 1, 1}}),
        {ctx.buffer(in[0]), ctx.buffer(in[1]), ctx.buffer(in[2]), ctx.buffer(out)}, push,
        shape.elements());
  }

  std::vector<Gradient> gradient(std::span<const Tensor> in, const Tensor&,
                                 const Tensor& dy) const override {
    const Tensor zero = dy.graph().scalar(0.0f);
    return {Gradient{}, Gradient{sum_to(where(in[0], dy, zero), in[1].shape())},
            Gradient{sum_to(where(in[0], zero, dy), in[2].shape())}};
  }
};

}  // namespace

Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b) {
  for (const Tensor* t : {&condition, &a, &b}) {
    if (!t->valid()) throw Error("where: an input tensor is empty");
  }
  const std::string what =
      fmt::format("where('{}', '{}', '{}')", condition.name(), a.name(), b.name());
  for (const Tensor* t : {&a, &b}) {
    if (&t->graph() != &condition.graph()) {
      throw Error(fmt::format("{}: the inputs belong to different graphs (devices)", what));
    }
  }
  for (const Tensor* t : {&condition, &a, &b}) {
    if (t->dtype() != DType::F32) {
      throw Error(
          fmt::format("{}: '{}' {}; where takes f32 (a condition is "
                      "nonzero for true, as the comparisons give)",
                      what, t->name(), ops_detail::not_f32(*t)));
    }
  }
  const Shape shape =
      broadcast_shapes(condition.shape(), broadcast_shapes(a.shape(), b.shape(), what), what);
  const std::array<Shape, 3> operands{condition.shape(), a.shape(), b.shape()};
  ops_detail::fold_broadcast_or_throw(shape, operands, what);
  return condition.graph().add_node(std::make_unique<WhereOp>(), {condition, a, b}, shape);
}

}  // namespace vkt
