// assign_moving_average (shaders/moving_average.comp).
#include "state_update.h"

#include <fmt/format.h>

#include <cmath>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "kernel_util.h"

namespace vkt {
namespace {

struct MovingAveragePush {
  std::uint32_t n;
  float decay;
  float scale;
};

class MovingAverageOp final : public Op {
 public:
  MovingAverageOp(float decay, float scale) : decay_(decay), scale_(scale) {}
  std::string type() const override { return "assign_moving_average"; }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const std::int64_t n = out.shape().elements();
    const Kernel& kernel = ctx.device().kernel(
        {.shader = "moving_average", .local_size = {ops_detail::kLocalSize, 1, 1}});
    ops_detail::dispatch_1d(ctx, kernel, {ctx.buffer(in[0]), ctx.buffer(in[1]), ctx.buffer(out)},
                            MovingAveragePush{static_cast<std::uint32_t>(n), decay_, scale_}, n);
  }
  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor&,
                                 const Tensor&) const override {
    return {Gradient{}, Gradient{}};
  }
  bool updates_state() const override { return true; }

 private:
  float decay_, scale_;
};

}  // namespace

Tensor assign_moving_average(const Tensor& variable, const Tensor& value, float decay,
                             float scale) {
  if (!variable.valid() || !value.valid()) {
    throw Error("assign_moving_average: an input tensor is empty");
  }
  Graph& g = variable.graph();
  const std::string what =
      fmt::format("assign_moving_average('{}', '{}')", variable.name(), value.name());
  if (g.info(variable).kind != TensorKind::Variable || g.variable_of(variable).trainable) {
    throw Error(
        fmt::format("{}: '{}' must be a variable made with trainable = false; an optimizer would "
                    "also write a trainable one",
                    what, variable.name()));
  }
  if (&value.graph() != &g || value.dtype() != DType::F32 || variable.dtype() != DType::F32) {
    throw Error(fmt::format("{}: both tensors must be f32 tensors of one graph", what));
  }
  if (value.shape().elements() != variable.shape().elements()) {
    throw Error(fmt::format("{}: the value {} does not have the variable's shape {}", what,
                            value.shape().str(), variable.shape().str()));
  }
  if (!(decay >= 0.0f && decay <= 1.0f) || !std::isfinite(scale)) {
    throw Error(
        fmt::format("{}: decay {} must lie in [0, 1] and scale {} be finite", what, decay, scale));
  }
  if (value.shape().elements() > std::int64_t{1} << 31) {
    throw Error(fmt::format("{}: {} elements are more than one dispatch takes", what,
                            value.shape().elements()));
  }
  const Tensor update = g.add_node(std::make_unique<MovingAverageOp>(decay, scale),
                                   {variable, value}, variable.shape());
  g.add_state_update(update);
  return update;
}

}  // namespace vkt
