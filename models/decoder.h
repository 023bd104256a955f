#pragma once
// Decoders built from a Hugging Face config: the Llama family (RMSNorm,
// rotary positions, grouped-query attention, SwiGLU) and GPT-2 (learned
// positions, LayerNorm, GELU), with LoRA adapters on chosen projections.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "../runtime/graph/ops/attention.h"
#include "../runtime/graph/ops/layers.h"
#include "../runtime/graph/tensor.h"
#include "decoder_weights.h"
#include "hf_config.h"

namespace vkt::models {

/// How a decoder is built.
struct DecoderOptions {
  /// A LoRA fine-tune when set: every pretrained weight is frozen in
  /// `lora->base_dtype` and the projections `lora_targets` name take
  /// trainable adapters. Unset: every weight trains, in f32.
  std::optional<layers::LoraOptions> lora{};
  /// The projections that take adapters, matched as PEFT's target_modules
  /// are: a module whose name is a target or ends in "." + target. Empty:
  /// default_lora_targets(config).
  std::vector<std::string> lora_targets{};
  /// Dropout on the attention probabilities and the residual branches in
  /// training (Hugging Face's Llama and GPT-2 fine-tunes use 0 and 0.1).
  float dropout = 0.0f;
  AttentionKernel attention_kernel = AttentionKernel::Auto;
};

/// The projections LoRA adapts by default: q, k, v and o (Llama's q_proj,
/// k_proj, v_proj, o_proj; GPT-2's fused attn.c_attn and attn.c_proj).
std::vector<std::string> default_lora_targets(const DecoderConfig& config);

/// True when `module` ("model.layers.0.self_attn.q_proj") is one of `targets`
/// as PEFT matches target_modules.
bool lora_targeted(const std::string& module, const std::vector<std::string>& targets);

/// How a decoder's layer `layer` attends: q [B, H, T, Dh], k and v
/// [B, Hkv, T, Dh] (rotated, before grouped-query repetition) to [B, H, T, Dh].
/// The default is causal attention over the T positions themselves; an
/// inference session attends over its key/value cache instead.
using AttentionFn =
    std::function<Tensor(const Tensor& q, const Tensor& k, const Tensor& v, std::int64_t layer)>;

/// The decoder's logits [B, T, vocab] for `tokens` [B, T] (i32) at
/// `positions` [T] (i32; 0..T-1 for a whole sequence), its variables made in
/// tokens' graph under the Hugging Face module names
/// (decoder_weight_entries), from `weights` where they hold the variable and
/// as Hugging Face initializes a fresh model otherwise (normal(0, 0.02)
/// matrices, unit norms, zero biases). Adapters are "<module>/lora_a" [in, r]
/// and "<module>/lora_b" [r, out].
///
///   vkt::models::DecoderConfig config = vkt::models::read_decoder_config("tiny-llama");
///   vkt::models::DecoderWeights weights = vkt::models::load_weights("tiny-llama", config);
///   vkt::Tensor logits = vkt::models::decoder_logits(tokens, positions, config, weights,
///                                                    {.lora = vkt::layers::LoraOptions{}});
Tensor decoder_logits(const Tensor& tokens, const Tensor& positions, const DecoderConfig& config,
                      const DecoderWeights& weights, const DecoderOptions& options = {},
                      const AttentionFn& attention = {});

}  // namespace vkt::models
