// softmax, log_softmax (shaders/softmax.comp, softmax_grad.comp), argmax
// (argmax.comp) and one_hot (one_hot.comp).
#include "softmax.h"

#include <fmt/format.h>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "kernel_util.h"

namespace vkt {
namespace {

// The OP codes of softmax.comp and softmax_grad.comp.
enum class SoftmaxKind : std::uint32_t { Softmax, LogSoftmax };

/// x seen as [outer, len, inner] around the reduced axis.
struct RowPush {
  std::uint32_t rows, len, inner;
};

RowPush rows_around(const Shape& shape, int axis) {
  std::int64_t inner = 1;
  for (int i = axis + 1; i < shape.rank(); ++i) inner *= shape[i];
  const std::int64_t len = shape[axis];
  return {static_cast<std::uint32_t>(shape.elements() / len), static_cast<std::uint32_t>(len),
          static_cast<std::uint32_t>(inner)};
}

// Rows over the last axis of kRowKernelLen and more take the row kernels
// (softmax_rows*.comp: a workgroup of kRowLanes per row, a fixed tree).
using ops_detail::kRowKernelLen;
using ops_detail::kRowLanes;

struct RowsPush {
  std::uint32_t rows, len;
};

bool row_kernel(const RowPush& p) {
  return p.inner == 1 && p.len >= kRowKernelLen;
}

/// `shader` (softmax_rows or its gradient) with one workgroup per row.
void dispatch_rows(RecordContext& ctx, const char* shader, SoftmaxKind kind, const RowPush& p,
                   std::initializer_list<BufferRange> buffers) {
  const Kernel& kernel =
      ctx.device().kernel({.shader = shader,
                           .local_size = {kRowLanes, 1, 1},
                           .constants = {SpecConstant::u32(1, static_cast<std::uint32_t>(kind))}});
  ops_detail::dispatch_1d(ctx, kernel, buffers, RowsPush{p.rows, p.len},
                          std::int64_t{p.rows} * kRowLanes);
}

class SoftmaxGradOp final : public Op {
 public:
  SoftmaxGradOp(SoftmaxKind kind, int axis) : kind_(kind), axis_(axis) {}
  std::string type() const override {
    return kind_ == SoftmaxKind::Softmax ? "softmax_grad" : "log_softmax_grad";
  }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const RowPush push = rows_around(out.shape(), axis_);
    if (row_kernel(push)) {
      return dispatch_rows(ctx, "softmax_rows_grad", kind_, push,
                           {ctx.buffer(in[0]), ctx.buffer(in[1]), ctx.buffer(out)});
    }
    ops_detail::dispatch_1d(
        ctx, ops_detail::kernel_1d(ctx, "softmax_grad", static_cast<std::uint32_t>(kind_)),
        {ctx.buffer(in[0]), ctx.buffer(in[1]), ctx.buffer(out)}, push, push.rows);
  }
  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor&,
                                 const Tensor&) const override {
    throw Error(fmt::format("{}: second derivatives are not supported", type()));
  }

 private:
  SoftmaxKind kind_;
  int axis_;
};

class SoftmaxOp final : public Op {
 public:
  SoftmaxOp(SoftmaxKind kind, int axis) : kind_(kind), axis_(axis) {}
  std::string type() const override {
    return kind_ == SoftmaxKind::Softmax ? "softmax" : "log_softmax";
  }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const RowPush push = rows_around(out.shape(), axis_);
    if (row_kernel(push)) {
      return dispatch_rows(ctx, "softmax_rows", kind_, push, {ctx.buffer(in[0]), ctx.buffer(out)});
    }
    ops_detail::dispatch_1d(
        ctx, ops_detail::kernel_1d(ctx, "softmax", static_cast<std::uint32_t>(kind_)),
        {ctx.buffer(in[0]), ctx.buffer(out)}, push, push.rows);
  }
  // Both backward formulas need only the forward output, not x.
  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor& out,
                                 const Tensor& dy) const override {
    return {Gradient{out.graph().add_node(std::make_unique<SoftmaxGradOp>(kind_, axis_), {out, dy},
                                          out.shape())}};
  }

 private:
  SoftmaxKind kind_;
  int axis_;
};

class ArgmaxOp final : public Op {
 public:
  explicit ArgmaxOp(int axis) : axis_(axis) {}
  std::string type() const override { return "argmax"; }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const RowPush push = rows_around(in[0].shape(), axis_);
    const Kernel& kernel =
        ctx.device().kernel({.shader = "argmax", .local_size = {ops_detail::kLocalSize, 1, 1}});
    ops_detail::dispatch_1d(ctx, kernel, {ctx.buffer(in[0]), ctx.buffer(out)}, push, push.rows);
  }
  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor&,
                                 const Tensor&) const override {
    return {Gradient{}};  // piecewise constant
  }

 private:
  int axis_;
};

struct OneHotPush {
  std::uint32_t n, depth;
  float on, off;
};

class OneHotOp final : public Op {
 public:
  OneHotOp(float on, float off) : on_(on), off_(off) {}
  std::string type() const override { return "one_hot"; }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const Shape& s = out.shape();
    const OneHotPush push{static_cast<std::uint32_t>(s.elements()),
                          static_cast<std::uint32_t>(s[s.rank() - 1]), on_, off_};
    const Kernel& kernel =
        ctx.device().kernel({.shader = "one_hot", .local_size = {ops_detail::kLocalSize, 1, 1}});
    ops_detail::dispatch_1d(ctx, kernel, {ctx.buffer(in[0]), ctx.buffer(out)}, push, s.elements());
  }
  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor&,
                                 const Tensor&) const override {
    return {Gradient{}};  // indices are integers
  }

 private:
  float on_, off_;
};

/// Checks `x` and resolves `axis`; `op` names the op in messages.
int checked_axis(const Tensor& x, int axis, const char* op) {
  if (!x.valid()) throw Error(fmt::format("{}: the input tensor is empty", op));
  if (x.dtype() != DType::F32) {
    throw Error(fmt::format("{}: input '{}' {} holds i32 values; {} takes f32", op, x.name(),
                            x.shape().str(), op));
  }
  if (x.shape().rank() == 0) {
    throw Error(
        fmt::format("{}: input '{}' is a scalar; it needs at least one axis", op, x.name()));
  }
  const std::string what = fmt::format("{}('{}' {})", op, x.name(), x.shape().str());
  return x.shape().axis(axis, what.c_str());
}

Tensor softmax_like(SoftmaxKind kind, const Tensor& x, int axis) {
  const char* op = kind == SoftmaxKind::Softmax ? "softmax" : "log_softmax";
  const int a = checked_axis(x, axis, op);
  return x.graph().add_node(std::make_unique<SoftmaxOp>(kind, a), {x}, x.shape());
}

}  // namespace

Tensor softmax(const Tensor& x, int axis) {
  return softmax_like(SoftmaxKind::Softmax, x, axis);
}

Tensor log_softmax(const Tensor& x, int axis) {
  return softmax_like(SoftmaxKind::LogSoftmax, x, axis);
}

Tensor argmax(const Tensor& x, int axis) {
  const int a = checked_axis(x, axis, "argmax");
  std::vector<std::int64_t> dims = x.shape().dims();
  dims.erase(dims.begin() + a);
  return x.graph().add_node(std::make_unique<ArgmaxOp>(a), {x}, Shape(dims), DType::I32);
}

Tensor one_hot(const Tensor& indices, std::int64_t depth, float on, float off) {
  if (!indices.valid()) throw Error("one_hot: the indices tensor is empty");
  if (indices.dtype() != DType::I32) {
    throw Error(fmt::format("one_hot: indices '{}' {} hold f32 values; they must be i32",
                            indices.name(), indices.shape().str()));
  }
  if (indices.shape().rank() >= Shape::kMaxRank) {
    throw Error(fmt::format(
        "one_hot: indices '{}' {} have rank {}; the result adds an axis and "
        "may have rank {} at most",
        indices.name(), indices.shape().str(), indices.shape().rank(), Shape::kMaxRank));
  }
  if (depth < 1) {
    throw Error(fmt::format("one_hot: depth {} for indices '{}' {}; it must be at least 1", depth,
                            indices.name(), indices.shape().str()));
  }
  std::vector<std::int64_t> dims = indices.shape().dims();
  dims.push_back(depth);
  return indices.graph().add_node(std::make_unique<OneHotOp>(on, off), {indices}, Shape(dims));
}

}  // namespace vkt
