// models::causal_lm_model_fn.
#include "causal_lm.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "../optimizers/adam.h"
#include "../optimizers/tower_optimizer.h"
#include "../runtime/graph/executor.h"
#include "../runtime/graph/graph.h"
#include "../runtime/graph/ops/losses.h"
#include "../runtime/vulkan/error.h"

namespace vkt::models {
namespace {

/// AdamW (decay on the matrices) and Adam (the rest) over every trainable
/// variable, one backward pass for both; the train op.
Tensor train_op(Graph& g, const Tensor& loss, const CausalLmSettings& s) {
  std::vector<Tensor> variables;
  for (const Variable& v : g.variables()) {
    if (v.trainable) variables.push_back(v.tensor);
  }
  const auto warmup = std::max<std::uint64_t>(
      1,
      static_cast<std::uint64_t>(std::llround(s.warmup_fraction * static_cast<double>(s.steps))));
  const LearningRate lr = LearningRate::cosine_decay(s.learning_rate, s.steps, 0.0, warmup);
  const Clipping clip{.global_norm = s.clip_norm};
  TowerOptimizer adamw([=] {
    return std::make_unique<AdamW>(lr,
                                   AdamOptions{.weight_decay = s.weight_decay, .clipping = clip});
  });
  TowerOptimizer adam([=] { return std::make_unique<Adam>(lr, AdamOptions{.clipping = clip}); });
  std::vector<GradVar> matrices, others;
  for (const GradVar& gv : adamw.compute_gradients(loss, variables)) {
    (gv.var.shape().rank() == 2 ? matrices : others).push_back(gv);
  }
  Tensor op = matrices.empty() ? Tensor{} : adamw.apply_gradients(matrices);
  if (!others.empty()) op = adam.apply_gradients(others);
  return op;
}

}  // namespace

ModelFn causal_lm_model_fn(std::shared_ptr<const PretrainedDecoder> model,
                           const CausalLmSettings& settings) {
  return [model = std::move(model), settings](ModelContext& ctx, const TensorDict& features,
                                              const TensorDict& labels, Mode mode, const Params&) {
    Graph& g = ctx.graph();
    const Tensor tokens = features.at("tokens");
    std::vector<std::int32_t> steps(static_cast<std::size_t>(tokens.shape()[1]));
    std::iota(steps.begin(), steps.end(), 0);
    const Tensor positions = g.constant_i32(Shape{tokens.shape()[1]}, steps);
    const Tensor logits =
        decoder_logits(tokens, positions, model->config, model->weights, settings.decoder);
    EstimatorSpec spec{.mode = mode, .predictions = {{"logits", logits}}};
    if (mode == Mode::Predict) return spec;
    spec.loss = sparse_softmax_cross_entropy(labels.at("next"), logits, Tensor{}, Reduction::Mean);
    if (mode == Mode::Train) spec.train_op = train_op(g, spec.loss, settings);
    return spec;
  };
}

double held_out_loss(Device& device, const DecoderConfig& config, const DecoderWeights& weights,
                     const DecoderOptions& options, const Dataset& windows, std::int64_t batch_size,
                     std::int64_t max_batches) {
  if (windows.size() == 0) throw Error("held_out_loss: there are no windows to score");
  const std::int64_t b = std::min(batch_size, windows.size());
  const std::int64_t t = windows.columns().at("tokens").shape[1];
  Graph g(device);
  const Tensor tokens = g.input("tokens", {b, t}, DType::I32);
  const Tensor next = g.input("next", {b, t}, DType::I32);
  std::vector<std::int32_t> steps(static_cast<std::size_t>(t));
  std::iota(steps.begin(), steps.end(), 0);
  DecoderOptions scoring = options;
  scoring.dropout = 0.0f;
  const Tensor logits =
      decoder_logits(tokens, g.constant_i32(Shape{t}, steps), config, weights, scoring);
  const Tensor loss = sparse_softmax_cross_entropy(next, logits, Tensor{}, Reduction::Mean);
  Executor exec(g, {loss}, {.training = false});
  double total = 0;
  std::int64_t batches = 0;
  for (std::int64_t start = 0; start + b <= windows.size() && batches < max_batches; start += b) {
    const HostBatch rows = windows.rows(start, b);
    exec.feed("tokens", rows.at("tokens").i32);
    exec.feed("next", rows.at("next").i32);
    exec.run();
    total += exec.read(loss)[0];
    ++batches;
  }
  return total / static_cast<double>(batches);
}

}  // namespace vkt::models
