// max_pool2d, avg_pool2d and global_avg_pool (shaders/pool.comp forward,
// pool_max_grad.comp and pool_avg_grad.comp backward, gathered per input cell).
#include "pool.h"

#include <fmt/format.h>

#include <iterator>
#include <limits>
#include <optional>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "kernel_util.h"
#include "shape_ops.h"

namespace vkt {
namespace {

// The OP codes of pool.comp.
enum class PoolKind : std::uint32_t { Max, Avg };

/// The window geometry: pool_params.glsl's specialization constants 2 to 12.
struct PoolGeometry {
  std::uint32_t h, w, c, oh, ow, kh, kw, sh, sw, pt, pl;
};

// pool_params.glsl does signed arithmetic on padded extents.
constexpr std::int64_t kMaxPaddedExtent = std::int64_t{1} << 30;

/// `shader` specialized for `g`, and for OP = `kind` where the shader has an OP.
const Kernel& pool_kernel(RecordContext& ctx, const char* shader, const PoolGeometry& g,
                          std::optional<PoolKind> kind = std::nullopt) {
  KernelDesc desc{.shader = shader, .local_size = {ops_detail::kLocalSize, 1, 1}};
  if (kind) desc.constants.push_back(SpecConstant::u32(1, static_cast<std::uint32_t>(*kind)));
  const std::uint32_t values[] = {g.h, g.w, g.c, g.oh, g.ow, g.kh, g.kw, g.sh, g.sw, g.pt, g.pl};
  for (std::uint32_t i = 0; i < std::size(values); ++i)
    desc.constants.push_back(SpecConstant::u32(2 + i, values[i]));
  return ctx.device().kernel(desc);
}

/// `n` invocations (pool_params.glsl's push constant).
void dispatch_pool(RecordContext& ctx, const Kernel& kernel,
                   std::initializer_list<BufferRange> buffers, std::int64_t n) {
  const std::uint32_t push = static_cast<std::uint32_t>(n);
  ops_detail::dispatch_1d(ctx, kernel, buffers, push, n);
}

/// dx of average pooling: linear in dy, so its own gradient is average pooling again.
class AvgPoolGradOp final : public Op {
 public:
  explicit AvgPoolGradOp(PoolGeometry geometry) : geometry_(geometry) {}
  std::string type() const override { return "avg_pool2d_grad"; }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    dispatch_pool(ctx, pool_kernel(ctx, "pool_avg_grad", geometry_),
                  {ctx.buffer(in[0]), ctx.buffer(out)}, out.shape().elements());
  }
  std::vector<Gradient> gradient(std::span<const Tensor> in, const Tensor&,
                                 const Tensor& ddx) const override;

 private:
  PoolGeometry geometry_;
};

class MaxPoolGradOp final : public Op {
 public:
  explicit MaxPoolGradOp(PoolGeometry geometry) : geometry_(geometry) {}
  std::string type() const override { return "max_pool2d_grad"; }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    dispatch_pool(ctx, pool_kernel(ctx, "pool_max_grad", geometry_),
                  {ctx.buffer(in[0]), ctx.buffer(in[1]), ctx.buffer(in[2]), ctx.buffer(out)},
                  out.shape().elements());
  }
  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor&,
                                 const Tensor&) const override {
    throw Error("max_pool2d_grad: second derivatives are not supported");
  }

 private:
  PoolGeometry geometry_;
};

class PoolOp final : public Op {
 public:
  PoolOp(PoolKind kind, PoolGeometry geometry) : kind_(kind), geometry_(geometry) {}
  std::string type() const override { return kind_ == PoolKind::Max ? "max_pool2d" : "avg_pool2d"; }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    dispatch_pool(ctx, pool_kernel(ctx, "pool", geometry_, kind_),
                  {ctx.buffer(in[0]), ctx.buffer(out)}, out.shape().elements());
  }
  // The max-pool backward reads x and y to find each window's first maximum
  // again instead of storing its index: an op has one output, and the search
  // runs only where a cell equals its window's maximum.
  std::vector<Gradient> gradient(std::span<const Tensor> in, const Tensor& out,
                                 const Tensor& dy) const override {
    Graph& g = out.graph();
    if (kind_ == PoolKind::Max) {
      return {Gradient{
          g.add_node(std::make_unique<MaxPoolGradOp>(geometry_), {in[0], out, dy}, in[0].shape())}};
    }
    return {Gradient{g.add_node(std::make_unique<AvgPoolGradOp>(geometry_), {dy}, in[0].shape())}};
  }

 private:
  PoolKind kind_;
  PoolGeometry geometry_;
};

std::vector<Gradient> AvgPoolGradOp::gradient(std::span<const Tensor> in, const Tensor&,
                                              const Tensor& ddx) const {
  return {Gradient{ddx.graph().add_node(std::make_unique<PoolOp>(PoolKind::Avg, geometry_), {ddx},
                                        in[0].shape())}};
}

void check_input(const Tensor& x, const std::string& what) {
  if (!x.valid()) throw Error(what + ": the input tensor is empty");
  if (x.dtype() != DType::F32) {
    throw Error(fmt::format("{}: input '{}' {} {}; pooling takes f32 images", what, x.name(),
                            x.shape().str(), ops_detail::not_f32(x)));
  }
  if (x.shape().rank() != 4) {
    throw Error(fmt::format(
        "{}: input '{}' has shape {}; pooling takes rank-4 NHWC images [batch, height, width, "
        "channels] (reshape a [N, H, W] batch to [N, H, W, 1])",
        what, x.name(), x.shape().str()));
  }
  if (x.shape().elements() > std::numeric_limits<std::uint32_t>::max()) {
    throw Error(
        fmt::format("{}: input '{}' {} has {} elements; the pooling kernels index at "
                    "most 2^32 - 1",
                    what, x.name(), x.shape().str(), x.shape().elements()));
  }
}

/// Rejects padding choices that would give windows without an image cell, or
/// explicit values that Valid and Same would silently ignore.
void check_padding(const Pool2dOptions& o, const std::string& what) {
  const auto& p = o.explicit_padding;
  if (o.padding != Padding::Explicit) {
    if (p != std::array<std::int64_t, 4>{0, 0, 0, 0}) {
      throw Error(
          fmt::format("{}: explicit_padding is set but padding is not Padding::Explicit; "
                      "set padding = vkt::Padding::Explicit or leave explicit_padding "
                      "at zeros",
                      what));
    }
    return;
  }
  const char* names[] = {"top", "bottom", "left", "right"};
  for (int i = 0; i < 4; ++i) {
    const std::int64_t k = o.window[i / 2];
    if (k >= 1 && p[i] >= k) {
      throw Error(
          fmt::format("{}: {} padding {} is not smaller than the window's {} ({}); a "
                      "window could then hold only padding: use a padding below {}",
                      what, names[i], p[i], i < 2 ? "height" : "width", k, k));
    }
  }
}

PoolGeometry plan_pool(const Tensor& x, const Pool2dOptions& o, const std::string& what) {
  check_input(x, what);
  check_padding(o, what);
  const Shape& s = x.shape();
  const Window2d window{.size = o.window,
                        .strides = o.strides,
                        .padding = o.padding,
                        .explicit_padding = o.explicit_padding};
  const WindowPlan plan = plan_window(window, s[1], s[2], what);
  if (s[1] + plan.pad_top + plan.pad_bottom > kMaxPaddedExtent ||
      s[2] + plan.pad_left + plan.pad_right > kMaxPaddedExtent) {
    throw Error(fmt::format("{}: the padded image is larger than 2^30 along a side", what));
  }
  const auto u = [](std::int64_t v) { return static_cast<std::uint32_t>(v); };
  return PoolGeometry{u(s[1]),         u(s[2]),         u(s[3]),         u(plan.out_h),
                      u(plan.out_w),   u(o.window[0]),  u(o.window[1]),  u(o.strides[0]),
                      u(o.strides[1]), u(plan.pad_top), u(plan.pad_left)};
}

std::string describe(const char* op, const Tensor& x, const Pool2dOptions& o) {
  if (!x.valid()) return op;
  return fmt::format("{}('{}' {}, window {}x{}, strides {}x{})", op, x.name(), x.shape().str(),
                     o.window[0], o.window[1], o.strides[0], o.strides[1]);
}

Tensor pool(PoolKind kind, const Tensor& x, const Pool2dOptions& options) {
  const std::string what =
      describe(kind == PoolKind::Max ? "max_pool2d" : "avg_pool2d", x, options);
  const PoolGeometry geometry = plan_pool(x, options, what);
  const Shape out{x.shape()[0], geometry.oh, geometry.ow, x.shape()[3]};
  // Padding with stride 1 can make the output larger than the input.
  if (out.elements() > std::numeric_limits<std::uint32_t>::max()) {
    throw Error(
        fmt::format("{}: the output {} has {} elements; the pooling kernels index at "
                    "most 2^32 - 1",
                    what, out.str(), out.elements()));
  }
  return x.graph().add_node(std::make_unique<PoolOp>(kind, geometry), {x}, out);
}

}  // namespace

Tensor max_pool2d(const Tensor& x, const Pool2dOptions& options) {
  return pool(PoolKind::Max, x, options);
}

Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& options) {
  return pool(PoolKind::Avg, x, options);
}

Tensor global_avg_pool(const Tensor& x) {
  check_input(x, fmt::format("global_avg_pool('{}')", x.valid() ? x.name() : ""));
  const Shape& s = x.shape();
  // One window over the whole image: the same kernels, an output of 1 x 1.
  const Tensor pooled = avg_pool2d(x, {.window = {s[1], s[2]}, .strides = {1, 1}});
  return reshape(pooled, {s[0], s[3]});
}

}  // namespace vkt
