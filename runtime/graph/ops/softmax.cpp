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

// Rows over the last axis take the row kernels (softmax_rows*.comp: a
// workgroup of kRowLanes per row, a fixed tree) where the device runs rows by
// workgroup (ops_detail::row_workgroups).
using ops_detail::kRowLanes;

bool row_kernel(const Device& device, const RowPush& p) {
  return p.inner == 1 && ops_detail::row_workgroups(device, p.len);
}

/// What the forward reads besides x: softmax(scale * x), masked causally
/// when queries > 0 (attention's scores [..., queries, keys]).
struct SoftmaxInput {
  float scale = 1.0f;
  std::uint32_t queries = 0;
};

/// The kernel of `shader` (a softmax kernel) for `kind`; the row kernels' workgroup is kRowLanes.
const Kernel& softmax_kernel(RecordContext& ctx, const char* shader, SoftmaxKind kind, bool rows) {
  if (!rows) return ops_detail::kernel_1d(ctx, shader, static_cast<std::uint32_t>(kind));
  return ctx.device().kernel(
      {.shader = shader,
       .local_size = {kRowLanes, 1, 1},
       .constants = {SpecConstant::u32(1, static_cast<std::uint32_t>(kind))}});
}

/// Invocations of a dispatch: one workgroup per row, or one invocation per row.
std::int64_t threads(const RowPush& p, bool rows) {
  return rows ? std::int64_t{p.rows} * kRowLanes : std::int64_t{p.rows};
}

class SoftmaxGradOp final : public Op {
 public:
  SoftmaxGradOp(SoftmaxKind kind, int axis, float scale)
      : kind_(kind), axis_(axis), scale_(scale) {}
  std::string type() const override {
    return kind_ == SoftmaxKind::Softmax ? "softmax_grad" : "log_softmax_grad";
  }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const RowPush p = rows_around(out.shape(), axis_);
    const bool rows = row_kernel(ctx.device(), p);
    const std::initializer_list<BufferRange> buffers{ctx.buffer(in[0]), ctx.buffer(in[1]),
                                                     ctx.buffer(out)};
    const Kernel& kernel =
        softmax_kernel(ctx, rows ? "softmax_rows_grad" : "softmax_grad", kind_, rows);
    if (rows) {
      struct {
        std::uint32_t rows, len;
        float scale;
      } push{p.rows, p.len, scale_};
      return ops_detail::dispatch_1d(ctx, kernel, buffers, push, threads(p, rows));
    }
    struct {
      std::uint32_t rows, len, inner;
      float scale;
    } push{p.rows, p.len, p.inner, scale_};
    ops_detail::dispatch_1d(ctx, kernel, buffers, push, threads(p, rows));
  }
  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor&,
                                 const Tensor&) const override {
    throw Error(fmt::format("{}: second derivatives are not supported", type()));
  }

 private:
  SoftmaxKind kind_;
  int axis_;
  float scale_;
};

class SoftmaxOp final : public Op {
 public:
  SoftmaxOp(SoftmaxKind kind, int axis, SoftmaxInput input = {})
      : kind_(kind), axis_(axis), input_(input) {}
  std::string type() const override {
    if (input_.queries > 0 || input_.scale != 1.0f) return "masked_softmax";
    return kind_ == SoftmaxKind::Softmax ? "softmax" : "log_softmax";
  }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const RowPush p = rows_around(out.shape(), axis_);
    const bool rows = row_kernel(ctx.device(), p);
    const std::initializer_list<BufferRange> buffers{ctx.buffer(in[0]), ctx.buffer(out)};
    const Kernel& kernel = softmax_kernel(ctx, rows ? "softmax_rows" : "softmax", kind_, rows);
    if (rows) {
      struct {
        std::uint32_t rows, len;
        float scale;
        std::uint32_t queries;
      } push{p.rows, p.len, input_.scale, input_.queries};
      return ops_detail::dispatch_1d(ctx, kernel, buffers, push, threads(p, rows));
    }
    struct {
      std::uint32_t rows, len, inner;
      float scale;
      std::uint32_t queries;
    } push{p.rows, p.len, p.inner, input_.scale, input_.queries};
    ops_detail::dispatch_1d(ctx, kernel, buffers, push, threads(p, rows));
  }
  // Both backward formulas need only the forward output, not x.
  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor& out,
                                 const Tensor& dy) const override {
    return {Gradient{out.graph().add_node(
        std::make_unique<SoftmaxGradOp>(kind_, axis_, input_.scale), {out, dy}, out.shape())}};
  }

 private:
  SoftmaxKind kind_;
  int axis_;
  SoftmaxInput input_;
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
    throw Error(fmt::format("{}: input '{}' {} {}; {} takes f32", op, x.name(), x.shape().str(),
                            ops_detail::not_f32(x), op));
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

namespace ops_detail {

Tensor scaled_causal_softmax(const Tensor& scores, float scale, bool causal) {
  const int a = checked_axis(scores, -1, "masked_softmax");
  const Shape& s = scores.shape();
  const std::uint32_t queries = causal ? static_cast<std::uint32_t>(s[s.rank() - 2]) : 0u;
  return scores.graph().add_node(
      std::make_unique<SoftmaxOp>(SoftmaxKind::Softmax, a, SoftmaxInput{scale, queries}), {scores},
      s);
}

}  // namespace ops_detail

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
