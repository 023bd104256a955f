#include "loss_scaler.h"

#include <fmt/format.h>

#include <bit>
#include <cmath>

#include "../runtime/graph/graph.h"
#include "../runtime/graph/ops/elementwise.h"
#include "../runtime/graph/ops/kernel_util.h"
#include "../runtime/vulkan/error.h"

namespace vkt {
namespace {

/// shaders/loss_scale_update.comp: the scale and its count from the step's
/// last check. Inputs: scale, good steps, skipped steps, check. Output:
/// (scale used, skipped).
class LossScaleUpdateOp final : public Op {
 public:
  explicit LossScaleUpdateOp(std::uint32_t growth_interval) : growth_interval_(growth_interval) {}
  std::string type() const override { return "loss_scale_update"; }
  bool updates_variables() const override { return true; }
  bool windows_input(std::size_t) const override { return true; }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const Kernel& kernel = ctx.device().kernel({.shader = "loss_scale_update"});
    ctx.stream().dispatch(kernel,
                          {ctx.buffer(in[0]), ctx.buffer(in[1]), ctx.buffer(in[2]),
                           ctx.buffer(in[3]), ctx.buffer(out)},
                          growth_interval_, Groups{1, 1, 1});
  }
  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor&,
                                 const Tensor&) const override {
    throw Error("loss_scale_update is an update and has no gradient");
  }

 private:
  std::uint32_t growth_interval_;
};

bool power_of_two(float x) {
  int exponent = 0;
  return std::isfinite(x) && x > 0 && std::frexp(x, &exponent) == 0.5f;
}

}  // namespace

void check_loss_scale_options(const LossScaleOptions& options) {
  if (!power_of_two(options.initial_scale)) {
    throw Error(fmt::format(
        "the initial loss scale {} is not a power of two; give one (65536, PyTorch's default), so "
        "that scaling and unscaling the gradients are exact",
        options.initial_scale));
  }
  if (options.growth_interval < 1 || options.growth_interval > (1u << 24)) {
    throw Error(fmt::format(
        "the loss scale's growth interval is {}; give 1 to 16777216 good steps (2000, PyTorch's "
        "default)",
        options.growth_interval));
  }
}

LossScaler::LossScaler(Graph& graph, LossScaleOptions options) : options_(options) {
  check_loss_scale_options(options_);
  scale_ =
      graph.variable("loss_scale/scale", {}, Initializer::constant(options_.initial_scale), false);
  good_steps_ = graph.variable("loss_scale/good_steps", {}, Initializer::zeros(), false);
  skipped_steps_ = graph.variable("loss_scale/skipped_steps", {}, Initializer::zeros(), false);
  // A run written without loss scaling resumes with it from the initial scale.
  for (const Tensor& v : {scale_, good_steps_, skipped_steps_}) graph.set_optional_in_checkpoint(v);
}

Tensor LossScaler::scale(const Tensor& loss) const {
  if (!loss.valid() || &loss.graph() != &scale_.graph()) {
    throw Error("LossScaler::scale: the loss is empty or of another graph than the scaler's");
  }
  return loss * scale_;
}

Tensor LossScaler::apply_gradients(Optimizer& optimizer,
                                   const std::vector<GradVar>& grads_and_vars) {
  return optimizer.apply(grads_and_vars, scale_, last_check_);
}

Tensor LossScaler::update() {
  if (!last_check_.valid()) {
    throw Error(
        "LossScaler::update: no optimizer call went through this scaler; call "
        "scaler.apply_gradients(optimizer, grads) first");
  }
  return scale_.graph().add_node(std::make_unique<LossScaleUpdateOp>(options_.growth_interval),
                                 {scale_, good_steps_, skipped_steps_, last_check_}, Shape{2});
}

}  // namespace vkt
