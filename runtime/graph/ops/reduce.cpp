// Reductions (shaders/reduce.comp): to any shape whose dimensions are x's or 1.
#include <fmt/format.h>

#include <algorithm>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "elementwise.h"
#include "fold_axes.h"
#include "kernel_util.h"
#include "reduce.h"
#include "shape_ops.h"

namespace vkt {
namespace {

enum class ReduceKind : std::uint32_t { Sum, Max };

struct ReducePush {
  std::uint32_t n, pad[3];
  std::array<std::uint32_t, 4> out_dims, x_strides, red_dims;
};

struct RowsPush {
  std::uint32_t rows, n;
};
// reduce_rows.comp's workgroup, and the rows from which it beats one
// invocation per output.
constexpr std::int64_t kMinRows = 256;

/// Reduces x to `shape` (right-aligned, each dimension x's or 1).
class ReduceOp final : public Op {
 public:
  explicit ReduceOp(ReduceKind kind) : kind_(kind) {}
  std::string type() const override {
    return kind_ == ReduceKind::Sum ? "reduce_sum" : "reduce_max";
  }

  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    if (record_rows(ctx, in[0], out)) return;
    // x's axes folded where out keeps (or drops) neighbours alike.
    const auto folded = fold(in[0].shape(), out.shape());
    ReducePush push{};
    push.n = static_cast<std::uint32_t>(out.shape().elements());
    std::uint32_t stride = 1;
    for (int i = 3; i >= 0; --i) {
      const bool kept = folded.strides[0][i] != 0;
      push.x_strides[i] = stride;
      stride *= folded.dims[i];
      push.out_dims[i] = kept ? folded.dims[i] : 1;
      push.red_dims[i] = kept ? 1 : folded.dims[i];
    }
    ops_detail::dispatch_1d(ctx,
                            ops_detail::kernel_1d(ctx, "reduce", static_cast<std::uint32_t>(kind_)),
                            {ctx.buffer(in[0]), ctx.buffer(out)}, push, out.shape().elements());
  }

  /// x as [R, n] reduced over its leading R rows to out [n], when the rows are
  /// many and the outputs few: one workgroup per output (reduce_rows.comp).
  bool record_rows(RecordContext& ctx, const Tensor& x, const Tensor& out) const {
    const std::int64_t n = out.shape().elements(), rows = x.shape().elements() / n;
    if (rows < kMinRows || n > rows) return false;
    // The kept dimensions must be x's trailing ones: no reduced axis after a kept one.
    const auto folded = fold(x.shape(), out.shape());
    bool seen_kept = false;
    for (int d = 0; d < 4; ++d) {
      if (folded.dims[d] == 1) continue;  // left padding
      const bool kept = folded.strides[0][d] != 0;
      if (seen_kept && !kept) return false;
      seen_kept = seen_kept || kept;
    }
    const Kernel& kernel = ctx.device().kernel(
        {.shader = "reduce_rows",
         .local_size = {ops_detail::kRowLanes, 1, 1},
         .constants = {SpecConstant::u32(1, static_cast<std::uint32_t>(kind_))}});
    // Past 65535 outputs the workgroups wrap into y (index.glsl's scheme).
    const auto groups = static_cast<std::uint32_t>(n);
    const std::uint32_t x_groups = std::min<std::uint32_t>(groups, 65535);
    ctx.stream().dispatch(kernel, {ctx.buffer(x), ctx.buffer(out)},
                          RowsPush{static_cast<std::uint32_t>(rows), groups},
                          Groups{x_groups, (groups + x_groups - 1) / x_groups, 1});
    return true;
  }

  static ops_detail::BroadcastFold fold(const Shape& x, const Shape& out) {
    const std::array<Shape, 1> kept{out};
    return ops_detail::fold_broadcast_or_throw(x, kept, "reduce");
  }

  std::vector<Gradient> gradient(std::span<const Tensor> in, const Tensor& out,
                                 const Tensor& dy) const override {
    const Tensor& x = in[0];
    if (kind_ == ReduceKind::Sum) return {Gradient{broadcast_to(dy, x.shape())}};
    // Ties share the gradient equally, as TensorFlow's reduce_max does.
    const Tensor mask = equal(x, out);
    const Tensor count = sum_to(mask, out.shape());
    return {Gradient{mul(mask, div(dy, count))}};
  }

 private:
  ReduceKind kind_;
};

Tensor reduce_to(ReduceKind kind, const Tensor& x, const Shape& shape, const std::string& what) {
  if (!x.valid()) throw Error(what + ": the input tensor is empty");
  if (x.dtype() != DType::F32) throw Error(what + ": the tensor " + ops_detail::not_f32(x));
  if (x.shape() == shape) return x;  // reducing over nothing
  const std::array<Shape, 1> kept{shape};
  ops_detail::fold_broadcast_or_throw(x.shape(), kept, what);
  return x.graph().add_node(std::make_unique<ReduceOp>(kind), {x}, shape);
}

Shape kept(const Shape& s, int axis) {
  std::vector<std::int64_t> d = s.dims();
  d[axis] = 1;
  return Shape(d);
}

Shape dropped(const Shape& s, int axis) {
  std::vector<std::int64_t> d = s.dims();
  d.erase(d.begin() + axis);
  return Shape(d);
}

Tensor reduce_axis(ReduceKind kind, const Tensor& x, int axis, bool keepdims, const char* name) {
  const std::string what = fmt::format("{}('{}', axis {})", name, x.name(), axis);
  const int a = x.shape().axis(axis, what.c_str());
  const Tensor r = reduce_to(kind, x, kept(x.shape(), a), what);
  return keepdims ? r : reshape(r, dropped(x.shape(), a));
}

}  // namespace

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  const std::string what = fmt::format("sum_to('{}', {})", x.name(), shape.str());
  if (broadcast_shapes(shape, x.shape(), what) != x.shape()) {
    throw Error(fmt::format("{}: {} does not broadcast to {}", what, shape.str(), x.shape().str()));
  }
  return reduce_to(ReduceKind::Sum, x, shape, what);
}

Tensor reduce_sum(const Tensor& x) {
  return reduce_to(ReduceKind::Sum, x, Shape{}, "reduce_sum");
}
Tensor reduce_max(const Tensor& x) {
  return reduce_to(ReduceKind::Max, x, Shape{}, "reduce_max");
}
Tensor reduce_mean(const Tensor& x) {
  return reduce_sum(x) * (1.0f / static_cast<float>(x.shape().elements()));
}

Tensor reduce_sum(const Tensor& x, int axis, bool keepdims) {
  return reduce_axis(ReduceKind::Sum, x, axis, keepdims, "reduce_sum");
}
Tensor reduce_max(const Tensor& x, int axis, bool keepdims) {
  return reduce_axis(ReduceKind::Max, x, axis, keepdims, "reduce_max");
}
Tensor reduce_mean(const Tensor& x, int axis, bool keepdims) {
  const int a = x.shape().axis(axis, "reduce_mean");
  return reduce_sum(x, axis, keepdims) * (1.0f / static_cast<float>(x.shape()[a]));
}

}  // namespace vkt
