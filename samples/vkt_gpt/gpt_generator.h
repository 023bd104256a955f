#pragma once
// vkt-gpt's model as the library's GPT-2 decoder, so that sampling runs on a
// models::Generator (weights on the device, a key/value cache, one
// single-token step per character) instead of a prediction per character.

#include <fmt/format.h>

#include <vktower/models/generator.h>
#include <vktower/runtime/io/host_tensor.h>
#include <map>
#include <string>

#include "gpt_model.h"

/// vkt-gpt's sizes as a GPT-2 config: 4 x width MLP, LayerNorm 1e-5, GELU
/// (tanh), positions up to the context, and a bias on the logits.
inline vkt::models::DecoderConfig gpt_decoder_config(const GptSettings& s) {
  vkt::models::DecoderConfig c;
  c.architecture = vkt::models::Architecture::Gpt2;
  c.architecture_name = "vkt-gpt";
  c.vocab_size = s.vocab;
  c.hidden_size = s.width;
  c.intermediate_size = 4 * s.width;
  c.num_hidden_layers = s.layers;
  c.num_attention_heads = c.num_key_value_heads = s.heads;
  c.head_dim = s.width / s.heads;
  c.norm_eps = 1e-5;
  c.max_position_embeddings = s.context;
  c.tie_word_embeddings = s.tie_weights;
  c.q_bias = c.k_bias = c.v_bias = c.o_bias = c.mlp_bias = true;
  c.lm_head_bias = true;
  return c;
}

/// The checkpoint's values under the decoder's names: vkt-gpt's blocks
/// ("transformer_block", "transformer_block_1", ...: ln_1, attention/qkv,
/// attention/out, ln_2, mlp_in, mlp_out, and LoRA's adapters) are GPT-2's
/// transformer.h.N (ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj).
inline vkt::models::DecoderWeights gpt_decoder_weights(
    const std::map<std::string, vkt::HostTensor>& saved, const GptSettings& s) {
  std::map<std::string, std::string> renamed{
      {"wte", "transformer.wte/embeddings"},    {"wpe", "transformer.wpe/embeddings"},
      {"ln_f/gamma", "transformer.ln_f/gamma"}, {"ln_f/beta", "transformer.ln_f/beta"},
      {"lm_head/kernel", "lm_head/kernel"},     {"lm_head/bias", "lm_head/bias"}};
  const std::map<std::string, std::string> parts{
      {"ln_1", "ln_1"}, {"attention/qkv", "attn.c_attn"}, {"attention/out", "attn.c_proj"},
      {"ln_2", "ln_2"}, {"mlp_in", "mlp.c_fc"},           {"mlp_out", "mlp.c_proj"}};
  for (int l = 0; l < s.layers; ++l) {
    const std::string block = l == 0 ? "transformer_block" : fmt::format("transformer_block_{}", l);
    for (const auto& [ours, theirs] : parts) {
      for (const char* leaf : {"gamma", "beta", "kernel", "bias", "lora_a", "lora_b"}) {
        renamed[fmt::format("{}/{}/{}", block, ours, leaf)] =
            fmt::format("transformer.h.{}.{}/{}", l, theirs, leaf);
      }
    }
  }
  vkt::models::DecoderWeights weights;
  for (const auto& [name, value] : saved) {
    if (const auto it = renamed.find(name); it != renamed.end()) {
      weights.set(it->second, value.shape, value.f32);
    }
  }
  return weights;
}

/// LoRA as vkt-gpt trains it (rank r, alpha 2r, the base in bf16, adapters
/// on the attention's projections), or none.
inline vkt::models::DecoderOptions gpt_decoder_options(const GptSettings& s) {
  vkt::models::DecoderOptions options;
  if (s.lora_rank > 0) {
    options.lora = vkt::layers::LoraOptions{.rank = s.lora_rank,
                                            .alpha = 2.0f * static_cast<float>(s.lora_rank)};
  }
  return options;
}
