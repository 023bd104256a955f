// dropout (shaders/dropout.comp). Forward and gradient are the same op: both
// multiply by mask * scale, and the mask is recomputed from the step
// parameters, so the gradient is that op applied to dy.
#include "dropout.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "kernel_util.h"

namespace vkt {
namespace {

struct DropoutPush {
  std::uint32_t n, threshold, key;
  float scale;
};

/// dropout.comp's PER and dropout_vec4.comp's vec4: the elements one invocation takes.
constexpr std::int64_t kElementsPerInvocation = 4;

class DropoutOp final : public Op {
 public:
  DropoutOp(float rate, std::uint32_t key) : rate_(rate), key_(key) {}
  std::string type() const override { return "dropout"; }

  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    if (!ctx.training() || rate_ == 0.0f) {
      ctx.stream().copy(ctx.buffer(in[0]), ctx.buffer(out));
      return;
    }
    // Keep when the 32-bit hash >= rate * 2^32: an exact integer comparison, so
    // the keep probability is 1 - rate up to 2^-32 on every device.
    const double threshold = std::ldexp(static_cast<double>(rate_), 32);
    // A scalar is one row of one element.
    const std::int64_t rows =
        out.shape().rank() == 0 ? 1 : std::max<std::int64_t>(out.shape()[0], 1);
    const DropoutPush push{static_cast<std::uint32_t>(out.shape().elements()),
                           static_cast<std::uint32_t>(std::min(threshold, 4294967295.0)), key_,
                           scale(rate_)};
    const auto row_elements =
        static_cast<std::uint32_t>(std::max<std::int64_t>(out.shape().elements() / rows, 1));
    const bool vec4 = row_elements % kElementsPerInvocation == 0;
    ops_detail::dispatch_1d(
        ctx,
        ctx.device().kernel({.shader = vec4 ? "dropout_vec4" : "dropout",
                             .local_size = {ops_detail::kLocalSize, 1, 1},
                             .constants = {SpecConstant::u32(1, row_elements)}}),
        {ctx.buffer(in[0]), ctx.step_params(), ctx.buffer(out)}, push,
        (out.shape().elements() + kElementsPerInvocation - 1) / kElementsPerInvocation);
  }

  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor& out,
                                 const Tensor& dy) const override {
    return {
        Gradient{out.graph().add_node(std::make_unique<DropoutOp>(rate_, key_), {dy}, dy.shape())}};
  }

  static float scale(float rate) { return static_cast<float>(1.0 / (1.0 - rate)); }

 private:
  float rate_;
  std::uint32_t key_;
};

}  // namespace

Tensor dropout(const Tensor& x, float rate, std::uint32_t seed_offset) {
  if (!x.valid()) throw Error("dropout: the input tensor is empty");
  if (!(rate >= 0.0f && rate < 1.0f)) {
    throw Error(
        fmt::format("dropout('{}'): rate {} is outside [0, 1); it is the fraction of "
                    "elements dropped (0 keeps all)",
                    x.name(), rate));
  }
  if (x.dtype() != DType::F32) {
    throw Error(fmt::format("dropout('{}'): the tensor {}; dropout takes f32", x.name(),
                            ops_detail::not_f32(x)));
  }
  Graph& g = x.graph();
  // The node this op will be: distinct per dropout of a graph, and the same in
  // every graph built by the same code (every tower, every run).
  const auto position = static_cast<std::uint32_t>(g.nodes().size());
  const std::uint32_t key = position * 0x9e3779b9u ^ seed_offset;
  return g.add_node(std::make_unique<DropoutOp>(rate, key), {x}, x.shape());
}

}  // namespace vkt
