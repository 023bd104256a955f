#pragma once
// Dynamic loss scaling for half-precision training, as PyTorch's GradScaler.

#include <cstdint>
#include <vector>

#include "optimizer.h"

namespace vkt {

class Graph;

/// Dynamic loss scaling's settings; the defaults are GradScaler's.
struct LossScaleOptions {
  /// The first scale; a power of two, so scaling and unscaling are exact.
  float initial_scale = 65536.0f;
  /// Consecutive steps without an inf or NaN gradient after which the scale
  /// doubles.
  std::uint32_t growth_interval = 2000;
};

/// Throws vkt::Error unless `options` are usable: an initial scale that is a
/// power of two, a growth interval of 1 to 2^24 steps.
void check_loss_scale_options(const LossScaleOptions& options);

/// Dynamic loss scaling, as torch.cuda.amp.GradScaler: the loss is multiplied
/// by a scale before the backward pass, so that small gradients survive half
/// precision; each optimizer call's update first checks its gradients on the
/// device and, where one is inf or NaN, skips the call (weights and slots
/// unchanged), else unscales them; update() then halves the scale after a step
/// that found one, or doubles it after growth_interval good steps in a row. The
/// scale (a power of two), its count of good steps and the count of every
/// skipped step are non-trainable variables, "loss_scale/scale",
/// "loss_scale/good_steps" and "loss_scale/skipped_steps", so checkpoints hold
/// them and a resume continues exactly. Nothing is read back to the host:
/// the decision stays on the device. The growth and backoff factors are
/// GradScaler's 2 and 0.5.
///
/// A skipped step still advances the global step, as Keras' LossScaleOptimizer
/// counts it: learning-rate schedules and Adam's bias corrections see every
/// step. PyTorch's Adam does not count a skipped step.
///
///   vkt::LossScaler scaler(graph);
///   auto grads = adam.compute_gradients(scaler.scale(loss));
///   vkt::Tensor train = scaler.apply_gradients(adam, grads);
///   vkt::Tensor scaled = scaler.update();  // (scale used, 1 if skipped)
///   vkt::Executor step(graph, {loss, train, scaled});
///
/// replicate_model_fn does all of this itself under ReplicateOptions::loss_scaling.
class LossScaler {
 public:
  /// Makes the scale's variables in `graph`, or takes those it already holds
  /// (a graph that another LossScaler, or a tower, made them in).
  explicit LossScaler(Graph& graph, LossScaleOptions options = {});

  /// `loss` times the scale, to take the gradients of.
  Tensor scale(const Tensor& loss) const;
  /// `optimizer`'s update of gradients of a scale()d loss: skipped if any of
  /// them is inf or NaN, else applied to the unscaled gradients. Each call
  /// decides for itself, as GradScaler.step(optimizer) does.
  Tensor apply_gradients(Optimizer& optimizer, const std::vector<GradVar>& grads_and_vars);
  /// The scale's update after the step's every apply_gradients; fetch it with
  /// the train ops. Its value after a run: (the scale the step used, 1 if any
  /// call was skipped, else 0).
  Tensor update();

  /// The scale variable (a scalar).
  const Tensor& scale_variable() const { return scale_; }
  /// The variable counting good steps since the scale last changed.
  const Tensor& good_steps_variable() const { return good_steps_; }
  /// The variable counting every skipped step (an inf or NaN gradient).
  const Tensor& skipped_steps_variable() const { return skipped_steps_; }

 private:
  LossScaleOptions options_;
  Tensor scale_;
  Tensor good_steps_;
  Tensor skipped_steps_;
  Tensor last_check_;  // the step's latest check: each ORs in the ones before
};

}  // namespace vkt
