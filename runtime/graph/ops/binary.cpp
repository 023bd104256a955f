// Binary elementwise ops with broadcasting (shaders/binary.comp).
#include <fmt/format.h>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "elementwise.h"
#include "elementwise_chain.h"
#include "fold_axes.h"
#include "kernel_util.h"
#include "reduce.h"

namespace vkt {
namespace {

// The OP codes of binary.comp.
enum class BinaryKind : std::uint32_t {
  Add,
  Sub,
  Mul,
  Div,
  Maximum,
  Minimum,
  GreaterEqual,
  Equal,
  NotEqual,
  DivNoNan,
  Greater,
  BroadcastA
};

const char* name_of(BinaryKind k) {
  static const char* names[] = {"add",       "sub",        "mul",           "div",
                                "maximum",   "minimum",    "greater_equal", "equal",
                                "not_equal", "div_no_nan", "greater",       "broadcast_to"};
  return names[static_cast<int>(k)];
}

struct BinaryPush {
  std::uint32_t n, pad[3];
  std::array<std::uint32_t, 4> dims, a_strides, b_strides;
};

class BinaryOp final : public Op {
 public:
  explicit BinaryOp(BinaryKind kind) : kind_(kind) {}
  std::string type() const override { return name_of(kind_); }
  std::optional<ElementwiseStep> elementwise_step() const override {
    return ElementwiseStep{ops_detail::kBinaryStepCode + static_cast<std::uint32_t>(kind_)};
  }

  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const Shape& shape = out.shape();
    const std::array<Shape, 2> operands{in[0].shape(), in[1].shape()};
    const auto fold = ops_detail::fold_broadcast_or_throw(shape, operands, type());
    BinaryPush push{};
    push.n = static_cast<std::uint32_t>(shape.elements());
    push.dims = fold.dims;
    push.a_strides = fold.strides[0];
    push.b_strides = fold.strides[1];
    // Both operands read element i of the output (no broadcast left after the
    // fold: one axis, stride 1 each): no index arithmetic in the kernel.
    const bool same_shapes = fold.dims[0] * fold.dims[1] * fold.dims[2] == 1 &&
                             fold.strides[0][3] == 1 && fold.strides[1][3] == 1;
    if (same_shapes && ops_detail::elementwise_vec4(shape.elements())) {
      const std::int64_t vec4s = shape.elements() / 4;
      ops_detail::dispatch_1d(
          ctx, ops_detail::kernel_1d(ctx, "binary_vec4", static_cast<std::uint32_t>(kind_)),
          {ctx.buffer(in[0]), ctx.buffer(in[1]), ctx.buffer(out)},
          static_cast<std::uint32_t>(vec4s), vec4s);
      return;
    }
    const Kernel& kernel =
        ctx.device().kernel({.shader = "binary",
                             .local_size = {ops_detail::kLocalSize, 1, 1},
                             .constants = {SpecConstant::u32(1, static_cast<std::uint32_t>(kind_)),
                                           SpecConstant::u32(2, same_shapes ? 1 : 0)}});
    ops_detail::dispatch_1d(ctx, kernel, {ctx.buffer(in[0]), ctx.buffer(in[1]), ctx.buffer(out)},
                            push, shape.elements());
  }

  std::vector<Gradient> gradient(std::span<const Tensor> in, const Tensor& out,
                                 const Tensor& dy) const override {
    const Tensor& a = in[0];
    const Tensor& b = in[1];
    const auto to_a = [&](const Tensor& g) { return Gradient{sum_to(g, a.shape())}; };
    const auto to_b = [&](const Tensor& g) { return Gradient{sum_to(g, b.shape())}; };
    switch (kind_) {
      case BinaryKind::Add:
        return {to_a(dy), to_b(dy)};
      case BinaryKind::Sub:
        return {to_a(dy), to_b(neg(dy))};
      case BinaryKind::Mul:
        return {to_a(mul(dy, b)), to_b(mul(dy, a))};
      case BinaryKind::Div:
        return {to_a(div(dy, b)), to_b(neg(div(mul(dy, out), b)))};
      case BinaryKind::DivNoNan:
        return {to_a(div_no_nan(dy, b)), to_b(neg(div_no_nan(mul(dy, out), b)))};
      // Ties send the gradient to a, as TensorFlow does.
      case BinaryKind::Maximum:
        return {to_a(mul(dy, greater_equal(a, b))), to_b(mul(dy, greater(b, a)))};
      case BinaryKind::Minimum:
        return {to_a(mul(dy, greater_equal(b, a))), to_b(mul(dy, greater(a, b)))};
      case BinaryKind::BroadcastA:
        return {to_a(dy), Gradient{}};
      default:
        return {Gradient{}, Gradient{}};  // comparisons: piecewise constant
    }
  }

 private:
  BinaryKind kind_;
};

Tensor binary(BinaryKind kind, const Tensor& a, const Tensor& b) {
  const char* op = name_of(kind);
  if (!a.valid() || !b.valid()) throw Error(fmt::format("{}: an input tensor is empty", op));
  if (&a.graph() != &b.graph()) {
    throw Error(
        fmt::format("{}: '{}' and '{}' belong to different graphs (devices); copy one "
                    "across first",
                    op, a.name(), b.name()));
  }
  for (const Tensor* t : {&a, &b}) {
    if (t->dtype() != DType::F32) {
      throw Error(fmt::format("{}: input '{}' {}; elementwise ops take f32", op, t->name(),
                              ops_detail::not_f32(*t)));
    }
  }
  const std::string what = fmt::format("{}('{}', '{}')", op, a.name(), b.name());
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), what);
  const std::array<Shape, 2> operands{a.shape(), b.shape()};
  ops_detail::fold_broadcast_or_throw(shape, operands, what);
  return a.graph().add_node(std::make_unique<BinaryOp>(kind), {a, b}, shape);
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  return binary(BinaryKind::Add, a, b);
}
Tensor sub(const Tensor& a, const Tensor& b) {
  return binary(BinaryKind::Sub, a, b);
}
Tensor mul(const Tensor& a, const Tensor& b) {
  return binary(BinaryKind::Mul, a, b);
}
Tensor div(const Tensor& a, const Tensor& b) {
  return binary(BinaryKind::Div, a, b);
}
Tensor maximum(const Tensor& a, const Tensor& b) {
  return binary(BinaryKind::Maximum, a, b);
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return binary(BinaryKind::Minimum, a, b);
}
Tensor div_no_nan(const Tensor& a, const Tensor& b) {
  return binary(BinaryKind::DivNoNan, a, b);
}
Tensor greater_equal(const Tensor& a, const Tensor& b) {
  return binary(BinaryKind::GreaterEqual, a, b);
}
Tensor greater(const Tensor& a, const Tensor& b) {
  return binary(BinaryKind::Greater, a, b);
}
Tensor equal(const Tensor& a, const Tensor& b) {
  return binary(BinaryKind::Equal, a, b);
}
Tensor not_equal(const Tensor& a, const Tensor& b) {
  return binary(BinaryKind::NotEqual, a, b);
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  const std::string what = fmt::format("broadcast_to('{}', {})", x.name(), shape.str());
  if (broadcast_shapes(x.shape(), shape, what) != shape) {
    throw Error(fmt::format("{}: {} does not broadcast to {}", what, x.shape().str(), shape.str()));
  }
  if (x.dtype() != DType::F32) throw Error(what + ": the tensor " + ops_detail::not_f32(x));
  const std::array<Shape, 2> operands{x.shape(), x.shape()};
  ops_detail::fold_broadcast_or_throw(shape, operands, what);
  return x.graph().add_node(std::make_unique<BinaryOp>(BinaryKind::BroadcastA), {x, x}, shape);
}

Tensor operator+(const Tensor& a, const Tensor& b) {
  return add(a, b);
}
Tensor operator-(const Tensor& a, const Tensor& b) {
  return sub(a, b);
}
Tensor operator*(const Tensor& a, const Tensor& b) {
  return mul(a, b);
}
Tensor operator/(const Tensor& a, const Tensor& b) {
  return div(a, b);
}
Tensor operator+(const Tensor& a, float b) {
  return add(a, a.graph().scalar(b));
}
Tensor operator-(const Tensor& a, float b) {
  return sub(a, a.graph().scalar(b));
}
Tensor operator*(const Tensor& a, float b) {
  return mul(a, a.graph().scalar(b));
}
Tensor operator*(float a, const Tensor& b) {
  return mul(b.graph().scalar(a), b);
}
Tensor operator/(const Tensor& a, float b) {
  return div(a, a.graph().scalar(b));
}

}  // namespace vkt
