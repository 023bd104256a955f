#pragma once
// vkt-gpt's model: a character-level GPT-2 (token and position embeddings,
// pre-LayerNorm transformer blocks, a final LayerNorm, logits), trained with
// AdamW on the matrices and Adam on the rest (GPT-2 decays no bias or norm),
// a cosine learning rate after a linear warm-up, and global-norm clipping at 1.

#include <vktower/optimizers/adam.h>
#include <vktower/optimizers/tower_optimizer.h>
#include <vktower/runtime/graph/frozen_scope.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/embedding.h>
#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/runtime/graph/ops/matmul.h>
#include <vktower/runtime/graph/ops/shape_ops.h>
#include <vktower/tower/model_fn.h>
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

/// The model's sizes and training settings (vkt::Params in the Estimator).
struct GptSettings {
  std::int64_t vocab = 0, context = 64, width = 128;
  int layers = 4, heads = 4;
  double dropout = 0.1, learning_rate = 3e-3, weight_decay = 0.1;
  std::uint64_t steps = 300;       ///< the cosine's length
  std::string attention = "auto";  ///< the attention kernel: auto, fused or composed
  /// GPT-2's weight tying: the logits are the final features times the token
  /// table (transposed), which then takes the gradients of both uses, summed.
  bool tie_weights = false;
  /// A LoRA fine-tune when above 0: the pretrained model frozen in bf16, and
  /// rank-r adapters (alpha 2r) on every attention projection the only
  /// weights that train.
  std::int64_t lora_rank = 0;
};

/// vkt-gpt's --attention value as the kernel choice.
inline vkt::AttentionKernel attention_kernel(const std::string& name) {
  if (name == "fused") return vkt::AttentionKernel::Fused;
  if (name == "composed") return vkt::AttentionKernel::Composed;
  return vkt::AttentionKernel::Auto;
}

inline vkt::Params to_params(const GptSettings& s) {
  return {{"vocab", s.vocab},
          {"context", s.context},
          {"width", s.width},
          {"layers", static_cast<std::int64_t>(s.layers)},
          {"heads", static_cast<std::int64_t>(s.heads)},
          {"dropout", s.dropout},
          {"learning_rate", s.learning_rate},
          {"weight_decay", s.weight_decay},
          {"steps", static_cast<std::int64_t>(s.steps)},
          {"attention", s.attention},
          {"tie_weights", s.tie_weights},
          {"lora_rank", s.lora_rank}};
}

/// The logits [B, T, vocab] of tokens [B, T] (i32), the variables made in `g`
/// on first use; `params` as to_params() gives them. Under LoRA every weight
/// but the adapters is frozen in bf16 (read through layer_weight).
inline vkt::Tensor gpt_logits(vkt::Graph& g, const vkt::Tensor& tokens, const vkt::Params& params) {
  const auto count = [&](const char* key) { return std::get<std::int64_t>(params.at(key)); };
  const std::int64_t vocab = count("vocab"), context = count("context"), width = count("width");
  std::optional<vkt::layers::LoraOptions> lora;
  if (const std::int64_t rank = count("lora_rank"); rank > 0) {
    lora = vkt::layers::LoraOptions{.rank = rank, .alpha = 2.0f * static_cast<float>(rank)};
  }
  // The weights outside the blocks: frozen under LoRA, as the blocks' bases are.
  std::optional<vkt::FrozenScope> frozen;
  if (lora) frozen.emplace(g, lora->base_dtype);
  const vkt::Tensor wte =
      vkt::layer_weight(g.variable("wte", {vocab, width}, vkt::Initializer::normal(0, 0.02f)));
  const vkt::Tensor wpe =
      vkt::layer_weight(g.variable("wpe", {context, width}, vkt::Initializer::normal(0, 0.01f)));
  vkt::Tensor h = vkt::embedding_lookup(wte, tokens) + wpe;  // [B, T, D]
  frozen.reset();
  const vkt::layers::TransformerOptions block{
      .dropout = static_cast<float>(std::get<double>(params.at("dropout"))),
      .attention_kernel = attention_kernel(std::get<std::string>(params.at("attention"))),
      .lora = lora};
  for (std::int64_t l = 0; l < count("layers"); ++l) {
    h = vkt::layers::transformer_block(h, static_cast<int>(count("heads")), block);
  }
  if (lora) frozen.emplace(g, lora->base_dtype);
  h = vkt::layers::layer_norm(h, 1e-5f, "ln_f");
  if (!std::get<bool>(params.at("tie_weights"))) {
    return vkt::layers::dense(h, vocab, vkt::layers::Activation::None, "lm_head");  // [B, T, V]
  }
  const vkt::Tensor bias = vkt::layer_weight(g.variable("lm_head/bias", {vocab}));
  const vkt::Shape s = h.shape();  // [B, T, D]
  const vkt::Tensor rows = vkt::reshape(h, vkt::Shape{s[0] * s[1], s[2]});
  const vkt::Tensor logits = vkt::bias_add(vkt::matmul(rows, wte, false, true), bias);  // wte again
  return vkt::reshape(logits, vkt::Shape{s[0], s[1], vocab});                           // [B, T, V]
}

/// GPT-2's optimizers for `loss`: AdamW (weight decay) on the matrices, Adam
/// on the biases and norms, both on a cosine schedule after a linear warm-up
/// and each clipping its gradients to a global norm of 1. One backward pass
/// serves both (a minimize() each would build two). Returns the train op.
inline vkt::Tensor gpt_train_op(vkt::Graph& g, const vkt::Tensor& loss, const vkt::Params& params) {
  const auto real = [&](const char* key) { return std::get<double>(params.at(key)); };
  const auto steps = static_cast<std::uint64_t>(std::get<std::int64_t>(params.at("steps")));
  std::vector<vkt::Tensor> variables;
  for (const vkt::Variable& v : g.variables()) {
    if (v.trainable) variables.push_back(v.tensor);  // not a frozen base
  }
  const vkt::LearningRate lr = vkt::LearningRate::cosine_decay(
      real("learning_rate"), steps, 0.1, std::max<std::uint64_t>(steps / 20, 1));
  const vkt::Clipping clip{.global_norm = 1.0f};
  vkt::TowerOptimizer adamw([=] {
    return std::make_unique<vkt::AdamW>(
        lr, vkt::AdamOptions{.weight_decay = real("weight_decay"), .clipping = clip});
  });
  vkt::TowerOptimizer adam(
      [=] { return std::make_unique<vkt::Adam>(lr, vkt::AdamOptions{.clipping = clip}); });
  std::vector<vkt::GradVar> matrices, others;
  for (const vkt::GradVar& gv : adamw.compute_gradients(loss, variables)) {
    (gv.var.shape().rank() == 2 ? matrices : others).push_back(gv);
  }
  const vkt::Tensor train_op = adamw.apply_gradients(matrices);
  // Under LoRA only the adapters train, all of them matrices.
  return others.empty() ? train_op : adam.apply_gradients(others);
}

inline vkt::EstimatorSpec gpt_model(vkt::ModelContext& ctx, const vkt::TensorDict& features,
                                    const vkt::TensorDict& labels, vkt::Mode mode,
                                    const vkt::Params& params) {
  vkt::Graph& g = ctx.graph();
  const vkt::Tensor logits = gpt_logits(g, features.at("tokens"), params);
  vkt::EstimatorSpec spec{.mode = mode, .predictions = {{"logits", logits}}};
  if (mode == vkt::Mode::Predict) return spec;
  spec.loss = vkt::sparse_softmax_cross_entropy(labels.at("next"), logits, vkt::Tensor{},
                                                vkt::Reduction::Mean);
  if (mode != vkt::Mode::Train) return spec;
  spec.train_op = gpt_train_op(g, spec.loss, params);
  return spec;
}
