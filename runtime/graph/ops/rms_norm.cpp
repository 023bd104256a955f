// rms_norm (shaders/rms_norm.comp) and its gradient: row statistics
// (rms_norm_stats.comp, as layer_norm's with a mean of 0), dx
// (rms_norm_grad.comp), and dgamma (layer_norm_param_grad.comp per block of
// rows, then a sum over the blocks).
#include "rms_norm.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <string>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "elementwise.h"
#include "kernel_util.h"
#include "norm_checks.h"
#include "shape_ops.h"

namespace vkt {
namespace {

/// rms_norm.glsl's push constants (layer_norm.glsl's): x seen as [rows, d].
struct NormPush {
  std::uint32_t rows, d;
  float epsilon;
  std::uint32_t block;
};

// Rows per invocation of layer_norm_param_grad.comp, as layer_norm takes them.
constexpr std::uint32_t kBlockRows = 64;
// layer_norm_param_grad.comp's OP for the gradient to gamma (dy * xhat).
constexpr std::uint32_t kGammaGrad = 0;

NormPush rows_of(const Shape& x, float epsilon) {
  const std::int64_t d = x[x.rank() - 1];
  return {static_cast<std::uint32_t>(x.elements() / d), static_cast<std::uint32_t>(d), epsilon,
          kBlockRows};
}

std::int64_t row_blocks(const NormPush& p) {
  return (std::int64_t{p.rows} + kBlockRows - 1) / kBlockRows;
}

/// The kernels of rms_norm, named by shader: a row kernel (the forward, its
/// statistics, dx), taking its `_rows` variant where the device runs rows by
/// workgroup (ops_detail::row_workgroups; forward and backward decide alike,
/// so the statistics match), or the gradient to gamma, one invocation per
/// block of rows and column. record() binds the inputs then the output.
class RmsNormKernelOp final : public Op {
 public:
  RmsNormKernelOp(const char* shader, float epsilon) : shader_(shader), epsilon_(epsilon) {}
  std::string type() const override { return param_grad() ? "rms_norm_gamma_grad" : shader_; }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const NormPush push = rows_of(in[0].shape(), epsilon_);
    std::vector<BufferRange> buffers;
    for (const Tensor& t : in) buffers.push_back(ctx.buffer(t));
    buffers.push_back(ctx.buffer(out));
    const Kernel* kernel = nullptr;
    std::uint64_t invocations = push.rows;
    if (param_grad()) {
      kernel = &ops_detail::kernel_1d(ctx, shader_, kGammaGrad);
      invocations = static_cast<std::uint64_t>(row_blocks(push)) * push.d;
    } else if (ops_detail::row_workgroups(ctx.device(), push.d)) {
      kernel = &ctx.device().kernel(
          {.shader = std::string(shader_) + "_rows", .local_size = {ops_detail::kRowLanes, 1, 1}});
      invocations *= ops_detail::kRowLanes;
    } else {
      kernel =
          &ctx.device().kernel({.shader = shader_, .local_size = {ops_detail::kLocalSize, 1, 1}});
    }
    ctx.stream().dispatch(*kernel, buffers, std::as_bytes(std::span<const NormPush>(&push, 1)),
                          Stream::linear_groups(*kernel, invocations));
  }
  std::vector<Gradient> gradient(std::span<const Tensor> in, const Tensor&,
                                 const Tensor& dy) const override;

 private:
  bool param_grad() const { return std::string(shader_) == "layer_norm_param_grad"; }
  const char* shader_;
  float epsilon_;
};

// The statistics are computed again rather than kept by the forward kernel:
// an op has one output, and an inference program should not pay for them.
std::vector<Gradient> RmsNormKernelOp::gradient(std::span<const Tensor> in, const Tensor&,
                                                const Tensor& dy) const {
  if (std::string(shader_) != "rms_norm") {
    throw Error(fmt::format("{}: second derivatives are not supported", type()));
  }
  const Tensor& x = in[0];
  Graph& g = x.graph();
  const NormPush p = rows_of(x.shape(), epsilon_);
  const Shape d{p.d};
  const auto kernel = [&](const char* shader) {
    return std::make_unique<RmsNormKernelOp>(shader, epsilon_);
  };
  const Tensor stats = g.add_node(kernel("rms_norm_stats"), {x}, Shape{p.rows, 2});
  const Tensor dx = g.add_node(kernel("rms_norm_grad"), {x, in[1], stats, dy}, x.shape());
  // Per-block partial sums, then the blocks summed in order: the same bits every run.
  const std::int64_t blocks = row_blocks(p);
  const Tensor partial =
      g.add_node(kernel("layer_norm_param_grad"), {x, stats, dy}, Shape{blocks, d[0]});
  const Tensor dgamma = blocks == 1 ? reshape(partial, d) : sum_to(partial, d);
  return {Gradient{dx}, Gradient{dgamma}};
}

}  // namespace

Tensor rms_norm(const Tensor& x, const Tensor& gamma, float epsilon) {
  const std::string what = ops_detail::check_norm_input("rms_norm", x, epsilon, "1e-6");
  const std::int64_t d = x.shape()[x.shape().rank() - 1];
  if (!gamma.valid()) throw Error(what + ": gamma is an empty tensor");
  if (gamma.dtype() != DType::F32 || gamma.shape() != Shape{d}) {
    throw Error(
        fmt::format("{}: gamma '{}' is {} {}; it must be f32 [{}], one value per entry "
                    "of x's last dimension",
                    what, gamma.name(), to_string(gamma.dtype()), gamma.shape().str(), d));
  }
  return x.graph().add_node(std::make_unique<RmsNormKernelOp>("rms_norm", epsilon), {x, gamma},
                            x.shape());
}

}  // namespace vkt
