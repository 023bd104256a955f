// layer_norm (shaders/layer_norm.comp) and its gradient: row statistics
// (layer_norm_stats.comp), dx (layer_norm_grad.comp), dgamma
// (layer_norm_gamma_grad.comp) and dbeta (a reduction over the rows).
#include "layer_norm.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "elementwise.h"
#include "kernel_util.h"

namespace vkt {
namespace {

/// layer_norm.glsl's push constants: x seen as [rows, d].
struct NormPush {
  std::uint32_t rows, d;
  float epsilon;
  std::uint32_t pad0;
};

NormPush rows_of(const Shape& x, float epsilon) {
  const std::int64_t d = x[x.rank() - 1];
  return {static_cast<std::uint32_t>(x.elements() / d), static_cast<std::uint32_t>(d), epsilon, 0};
}

const Kernel& norm_kernel(RecordContext& ctx, const char* shader) {
  return ctx.device().kernel({.shader = shader, .local_size = {ops_detail::kLocalSize, 1, 1}});
}

/// A backward kernel of layer_norm: record() dispatches `shader` over its
/// inputs then its output, one invocation per row (or per column for dgamma).
class NormGradOp final : public Op {
 public:
  NormGradOp(const char* shader, float epsilon, bool per_column)
      : shader_(shader), epsilon_(epsilon), per_column_(per_column) {}
  std::string type() const override { return shader_; }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const NormPush push = rows_of(in[0].shape(), epsilon_);
    std::vector<BufferRange> buffers;
    for (const Tensor& t : in) buffers.push_back(ctx.buffer(t));
    buffers.push_back(ctx.buffer(out));
    const Kernel& kernel = norm_kernel(ctx, shader_);
    const std::uint64_t n = per_column_ ? push.d : push.rows;
    ctx.stream().dispatch(kernel, buffers, std::as_bytes(std::span<const NormPush>(&push, 1)),
                          Stream::linear_groups(kernel, n));
  }
  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor&,
                                 const Tensor&) const override {
    throw Error(fmt::format("{}: second derivatives are not supported", type()));
  }

 private:
  const char* shader_;
  float epsilon_;
  bool per_column_;
};

class LayerNormOp final : public Op {
 public:
  explicit LayerNormOp(float epsilon) : epsilon_(epsilon) {}
  std::string type() const override { return "layer_norm"; }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const NormPush push = rows_of(in[0].shape(), epsilon_);
    ops_detail::dispatch_1d(
        ctx, norm_kernel(ctx, "layer_norm"),
        {ctx.buffer(in[0]), ctx.buffer(in[1]), ctx.buffer(in[2]), ctx.buffer(out)}, push,
        push.rows);
  }
  // The statistics are computed again rather than kept by the forward kernel:
  // an op has one output, and an inference program should not pay for them.
  std::vector<Gradient> gradient(std::span<const Tensor> in, const Tensor&,
                                 const Tensor& dy) const override {
    const Tensor& x = in[0];
    Graph& g = x.graph();
    const NormPush p = rows_of(x.shape(), epsilon_);
    const Shape d{p.d};
    const Tensor stats = g.add_node(
        std::make_unique<NormGradOp>("layer_norm_stats", epsilon_, false), {x}, Shape{p.rows, 2});
    const Tensor dx = g.add_node(std::make_unique<NormGradOp>("layer_norm_grad", epsilon_, false),
                                 {x, in[1], stats, dy}, x.shape());
    const Tensor dgamma = g.add_node(
        std::make_unique<NormGradOp>("layer_norm_gamma_grad", epsilon_, true), {x, stats, dy}, d);
    return {Gradient{dx}, Gradient{dgamma}, Gradient{sum_to(dy, d)}};
  }

 private:
  float epsilon_;
};

void check_param(const Tensor& p, const char* role, std::int64_t d, const std::string& what) {
  if (!p.valid()) throw Error(fmt::format("{}: {} is an empty tensor", what, role));
  if (p.dtype() != DType::F32 || p.shape() != Shape{d}) {
    throw Error(
        fmt::format("{}: {} '{}' is {} {}; it must be f32 [{}], one value per entry of "
                    "x's last dimension",
                    what, role, p.name(), to_string(p.dtype()), p.shape().str(), d));
  }
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float epsilon) {
  if (!x.valid()) throw Error("layer_norm: the input tensor is empty");
  const std::string what = fmt::format("layer_norm('{}' {})", x.name(), x.shape().str());
  if (x.dtype() != DType::F32) {
    throw Error(what + ": x holds i32 values; layer_norm takes f32");
  }
  if (x.shape().rank() == 0) {
    throw Error(what + ": x is a scalar; it needs a last dimension to normalize over");
  }
  if (x.shape().elements() > std::numeric_limits<std::uint32_t>::max()) {
    throw Error(fmt::format("{}: x has {} elements; the kernels index at most 2^32 - 1", what,
                            x.shape().elements()));
  }
  if (!std::isfinite(epsilon) || epsilon < 0.0f) {
    throw Error(fmt::format("{}: epsilon is {}; it must be finite and at least 0 (1e-5 is usual)",
                            what, epsilon));
  }
  const std::int64_t d = x.shape()[x.shape().rank() - 1];
  check_param(gamma, "gamma", d, what);
  check_param(beta, "beta", d, what);
  return x.graph().add_node(std::make_unique<LayerNormOp>(epsilon), {x, gamma, beta}, x.shape());
}

}  // namespace vkt
