#include "replicate.h"

#include "../runtime/vulkan/error.h"
#include "tower_run.h"

namespace vkt {
namespace {

/// A named type (not a lambda) so is_replicated() can recognise it.
struct ReplicatedModel {
  ModelFn model_fn;
  ReplicateOptions options;

  EstimatorSpec operator()(ModelContext& root, const TensorDict&, const TensorDict&, Mode mode,
                           const Params& params) const {
    EstimatorSpec spec;
    spec.mode = mode;
    spec.run = std::make_shared<TowerRun>(root, model_fn, options, mode, params);
    // The last tower's hooks, as TensorFlow's replicate_model_fn takes the
    // last tower's spec fields: the towers' hooks are one model's, and each
    // must run once per step, not once per tower.
    spec.training_hooks = spec.run->tower_spec(spec.run->towers() - 1).training_hooks;
    return spec;
  }
};

}  // namespace

ModelFn replicate_model_fn(ModelFn model_fn, ReplicateOptions options) {
  if (!model_fn) throw Error("replicate_model_fn: the model function is empty");
  if (options.loss_reduction == LossReduction::None) {
    throw Error(
        "replicate_model_fn: LossReduction::None is not allowed: with several towers a "
        "reduction is required to combine their losses; use Sum, Mean or "
        "SumByNonzeroWeights (the default)");
  }
  return ReplicatedModel{std::move(model_fn), options};
}

std::optional<LossScaleOptions> loss_scaling_of(const ReplicateOptions& options) {
  const bool on =
      options.loss_scaling == LossScaling::Dynamic ||
      (options.loss_scaling == LossScaling::Auto && options.precision == Precision::F16);
  if (!on) return std::nullopt;
  return options.loss_scale;
}

bool is_replicated(const ModelFn& model_fn) {
  return model_fn.target<ReplicatedModel>() != nullptr;
}

}  // namespace vkt
