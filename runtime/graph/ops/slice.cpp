// slice_rows (a view where alignment allows), slice_axis and split
// (shaders/slice.comp). Their gradients are zero pads (concat.cpp).
#include <fmt/format.h>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "kernel_util.h"
#include "shape_ops.h"

namespace vkt {
namespace {

struct SlicePush {
  std::uint32_t n, out_inner, in_inner, offset;
};

std::int64_t trailing(const Shape& s, int axis) {
  std::int64_t p = 1;
  for (int i = axis + 1; i < s.rank(); ++i) p *= s[i];
  return p;
}

/// Rows of the input, as a window on its memory.
class SliceRowsOp final : public Op {
 public:
  SliceRowsOp(std::int64_t begin, std::size_t offset) : begin_(begin), offset_(offset) {}
  std::string type() const override { return "slice_rows"; }
  void record(RecordContext&, std::span<const Tensor>, const Tensor&) const override {}
  std::vector<Gradient> gradient(std::span<const Tensor> in, const Tensor&,
                                 const Tensor& dy) const override {
    if (in[0].dtype() != DType::F32) return {Gradient{}};
    return {Gradient{pad_axis(dy, in[0].shape(), 0, begin_)}};
  }
  std::optional<std::size_t> view_offset() const override { return offset_; }

 private:
  std::int64_t begin_;
  std::size_t offset_;
};

/// A block along one axis, copied.
class SliceOp final : public Op {
 public:
  SliceOp(int axis, std::int64_t begin) : axis_(axis), begin_(begin) {}
  std::string type() const override { return "slice"; }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const std::int64_t t = trailing(out.shape(), axis_);
    const SlicePush push{static_cast<std::uint32_t>(out.shape().elements()),
                         static_cast<std::uint32_t>(out.shape()[axis_] * t),
                         static_cast<std::uint32_t>(in[0].shape()[axis_] * t),
                         static_cast<std::uint32_t>(begin_ * t)};
    ops_detail::dispatch_1d(
        ctx, ctx.device().kernel({.shader = "slice", .local_size = {ops_detail::kLocalSize, 1, 1}}),
        {ctx.buffer(in[0]), ctx.buffer(out)}, push, out.shape().elements());
  }
  std::vector<Gradient> gradient(std::span<const Tensor> in, const Tensor&,
                                 const Tensor& dy) const override {
    if (in[0].dtype() != DType::F32) return {Gradient{}};
    return {Gradient{pad_axis(dy, in[0].shape(), axis_, begin_)}};
  }

 private:
  int axis_;
  std::int64_t begin_;
};

Shape with_dim(const Shape& s, int axis, std::int64_t size) {
  std::vector<std::int64_t> d = s.dims();
  d[axis] = size;
  return Shape(d);
}

void check_block(const Tensor& x, int axis, std::int64_t begin, std::int64_t size,
                 const std::string& what) {
  if (begin < 0 || size < 1 || begin + size > x.shape()[axis]) {
    throw Error(
        fmt::format("{}: '{}' has shape {}, so along axis {} a block must lie in [0, {}) "
                    "and hold at least one entry",
                    what, x.name(), x.shape().str(), axis, x.shape()[axis]));
  }
}

}  // namespace

Tensor slice_rows(const Tensor& x, std::int64_t begin, std::int64_t count) {
  if (!x.valid()) throw Error("slice_rows: the input tensor is empty");
  const std::string what =
      fmt::format("slice_rows('{}', begin {}, count {})", x.name(), begin, count);
  if (x.shape().rank() == 0) throw Error(what + ": a scalar has no rows");
  check_block(x, 0, begin, count, what);
  if (begin == 0 && count == x.shape()[0]) return x;
  const Shape shape = with_dim(x.shape(), 0, count);
  const std::size_t offset = static_cast<std::size_t>(begin * trailing(x.shape(), 0)) * 4;
  // A view is bound at its own offset, which kernels accept only on the
  // device's alignment; elsewhere the rows are copied.
  if (offset % tensor_alignment(x.graph().device()) == 0) {
    return x.graph().add_node(std::make_unique<SliceRowsOp>(begin, offset), {x}, shape, x.dtype());
  }
  return x.graph().add_node(std::make_unique<SliceOp>(0, begin), {x}, shape, x.dtype());
}

Tensor slice_axis(const Tensor& x, int axis, std::int64_t begin, std::int64_t size) {
  if (!x.valid()) throw Error("slice_axis: the input tensor is empty");
  const std::string what =
      fmt::format("slice_axis('{}', axis {}, begin {}, size {})", x.name(), axis, begin, size);
  const int a = x.shape().axis(axis, what.c_str());
  check_block(x, a, begin, size, what);
  if (a == 0) return slice_rows(x, begin, size);
  if (size == x.shape()[a]) return x;
  return x.graph().add_node(std::make_unique<SliceOp>(a, begin), {x}, with_dim(x.shape(), a, size),
                            x.dtype());
}

std::vector<Tensor> split(const Tensor& x, const std::vector<std::int64_t>& sizes, int axis) {
  if (!x.valid()) throw Error("split: the input tensor is empty");
  const std::string what = fmt::format("split('{}', axis {})", x.name(), axis);
  const int a = x.shape().axis(axis, what.c_str());
  std::int64_t total = 0;
  for (std::int64_t s : sizes) {
    if (s < 1) throw Error(fmt::format("{}: piece sizes must be at least 1, got {}", what, s));
    total += s;
  }
  if (sizes.empty() || total != x.shape()[a]) {
    throw Error(
        fmt::format("{}: the piece sizes add up to {} but '{}' has {} entries along axis "
                    "{} (shape {})",
                    what, total, x.name(), x.shape()[a], a, x.shape().str()));
  }
  std::vector<Tensor> pieces;
  std::int64_t begin = 0;
  for (std::int64_t s : sizes) {
    pieces.push_back(slice_axis(x, a, begin, s));
    begin += s;
  }
  return pieces;
}

}  // namespace vkt
