// layer_norm (shaders/layer_norm.comp) and its gradient: row statistics
// (layer_norm_stats.comp), dx (layer_norm_grad.comp), and dgamma and dbeta
// (layer_norm_param_grad.comp per block of rows, then a sum over the blocks).
#include "layer_norm.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "elementwise.h"
#include "kernel_util.h"
#include "norm_checks.h"
#include "shape_ops.h"

namespace vkt {
namespace {

/// layer_norm.glsl's push constants: x seen as [rows, d].
struct NormPush {
  std::uint32_t rows, d;
  float epsilon;
  std::uint32_t block;
};

// Rows per invocation of layer_norm_param_grad.comp: enough work per
// invocation to hide its start, enough invocations to fill the device.
constexpr std::uint32_t kBlockRows = 64;

NormPush rows_of(const Shape& x, float epsilon) {
  const std::int64_t d = x[x.rank() - 1];
  return {static_cast<std::uint32_t>(x.elements() / d), static_cast<std::uint32_t>(d), epsilon,
          kBlockRows};
}

std::int64_t row_blocks(const NormPush& p) {
  return (std::int64_t{p.rows} + kBlockRows - 1) / kBlockRows;
}

// Rows take the row kernels (*_rows.comp: a workgroup of kRowLanes per row,
// the sums by a fixed tree) where the device runs rows by workgroup
// (ops_detail::row_workgroups); else one invocation per row. Forward and
// backward decide alike, so the statistics match.
using ops_detail::kRowLanes;

/// `shader` (the row kernel's name when the rows are long) and its dispatch.
struct RowDispatch {
  std::string shader;
  std::uint32_t local;
  std::uint64_t invocations;
};
RowDispatch row_dispatch(const Device& device, const char* shader, const NormPush& p) {
  if (ops_detail::row_workgroups(device, p.d)) {
    return {std::string(shader) + "_rows", kRowLanes, std::uint64_t{p.rows} * kRowLanes};
  }
  return {shader, ops_detail::kLocalSize, p.rows};
}

// The OP codes of layer_norm_param_grad.comp.
enum class ParamGrad : std::uint32_t { Gamma, Beta };

/// A backward kernel of layer_norm: record() dispatches `shader` over its
/// inputs then its output, one invocation per row, or, with an OP code (the
/// parameter gradients), one per block of rows and column.
class NormGradOp final : public Op {
 public:
  NormGradOp(const char* shader, float epsilon, std::optional<ParamGrad> param = std::nullopt)
      : shader_(shader), epsilon_(epsilon), param_(param) {}
  std::string type() const override {
    if (!param_) return shader_;
    return *param_ == ParamGrad::Gamma ? "layer_norm_gamma_grad" : "layer_norm_beta_grad";
  }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const NormPush push = rows_of(in[0].shape(), epsilon_);
    std::vector<BufferRange> buffers;
    for (const Tensor& t : in) buffers.push_back(ctx.buffer(t));
    buffers.push_back(ctx.buffer(out));
    const RowDispatch rows = row_dispatch(ctx.device(), shader_, push);
    const Kernel& kernel =
        param_ ? ops_detail::kernel_1d(ctx, shader_, static_cast<std::uint32_t>(*param_))
               : ctx.device().kernel({.shader = rows.shader, .local_size = {rows.local, 1, 1}});
    const auto n =
        param_ ? static_cast<std::uint64_t>(row_blocks(push) * push.d) : rows.invocations;
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
  std::optional<ParamGrad> param_;
};

class LayerNormOp final : public Op {
 public:
  explicit LayerNormOp(float epsilon) : epsilon_(epsilon) {}
  std::string type() const override { return "layer_norm"; }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const NormPush push = rows_of(in[0].shape(), epsilon_);
    const RowDispatch rows = row_dispatch(ctx.device(), "layer_norm", push);
    ops_detail::dispatch_1d(
        ctx, ctx.device().kernel({.shader = rows.shader, .local_size = {rows.local, 1, 1}}),
        {ctx.buffer(in[0]), ctx.buffer(in[1]), ctx.buffer(in[2]), ctx.buffer(out)}, push,
        static_cast<std::int64_t>(rows.invocations));
  }
  // The statistics are computed again rather than kept by the forward kernel:
  // an op has one output, and an inference program should not pay for them.
  std::vector<Gradient> gradient(std::span<const Tensor> in, const Tensor&,
                                 const Tensor& dy) const override {
    const Tensor& x = in[0];
    Graph& g = x.graph();
    const NormPush p = rows_of(x.shape(), epsilon_);
    const Shape d{p.d};
    const Tensor stats = g.add_node(std::make_unique<NormGradOp>("layer_norm_stats", epsilon_), {x},
                                    Shape{p.rows, 2});
    const Tensor dx = g.add_node(std::make_unique<NormGradOp>("layer_norm_grad", epsilon_),
                                 {x, in[1], stats, dy}, x.shape());
    // Per-block partial sums, then the blocks summed in order: the same bits every run.
    const std::int64_t blocks = row_blocks(p);
    const auto param = [&](ParamGrad which) {
      const Tensor partial =
          g.add_node(std::make_unique<NormGradOp>("layer_norm_param_grad", epsilon_, which),
                     {x, stats, dy}, Shape{blocks, d[0]});
      return blocks == 1 ? reshape(partial, d) : sum_to(partial, d);
    };
    return {Gradient{dx}, Gradient{param(ParamGrad::Gamma)}, Gradient{param(ParamGrad::Beta)}};
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
  const std::string what = ops_detail::check_norm_input("layer_norm", x, epsilon, "1e-5");
  const std::int64_t d = x.shape()[x.shape().rank() - 1];
  check_param(gamma, "gamma", d, what);
  check_param(beta, "beta", d, what);
  return x.graph().add_node(std::make_unique<LayerNormOp>(epsilon), {x, gamma, beta}, x.shape());
}

}  // namespace vkt
