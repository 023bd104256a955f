#pragma once
// A Hugging Face decoder's config.json, read into what vktower's Llama and
// GPT-2 decoders need. Every problem is a one-line vkt::Error naming the file
// and the field and saying how to fix it, before any device work.
//
//   const vkt::models::DecoderConfig config =
//       vkt::models::read_decoder_config("/models/qwen2-0.5b");
//   if (config.architecture == vkt::models::Architecture::Llama) { ... }

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vkt::models {

/// The decoder families vktower builds.
enum class Architecture {
  /// RMSNorm, rotary positions, gated SiLU MLP, grouped-query attention:
  /// LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM.
  Llama,
  /// LayerNorm, learned positions, GELU MLP, Conv1D weights ([in, out]): GPT2LMHeadModel.
  Gpt2,
};

/// The fields of a config.json a decoder is built from (Hugging Face's names
/// in the comments; GPT-2's own names in parentheses).
struct DecoderConfig {
  /// The config.json read.
  std::string path;
  Architecture architecture = Architecture::Llama;
  /// architectures[0] as given ("LlamaForCausalLM", ...), or the one model_type implies.
  std::string architecture_name;
  /// model_type: "llama", "mistral", "qwen2" or "gpt2".
  std::string family;
  std::int64_t vocab_size = 0;
  /// hidden_size (n_embd).
  std::int64_t hidden_size = 0;
  /// intermediate_size (n_inner, or 4 * n_embd when null or absent).
  std::int64_t intermediate_size = 0;
  /// num_hidden_layers (n_layer).
  std::int64_t num_hidden_layers = 0;
  /// num_attention_heads (n_head).
  std::int64_t num_attention_heads = 0;
  /// num_key_value_heads: num_attention_heads unless given (GPT-2: heads).
  std::int64_t num_key_value_heads = 0;
  /// head_dim: hidden_size / num_attention_heads unless given.
  std::int64_t head_dim = 0;
  /// rms_norm_eps (layer_norm_epsilon): defaults 1e-6 (Llama), 1e-5 (GPT-2).
  double norm_eps = 0;
  /// rope_theta: 10000 unless given (unused by GPT-2).
  double rope_theta = 10000;
  /// max_position_embeddings (n_positions): defaults 2048 (Llama), 1024 (GPT-2).
  std::int64_t max_position_embeddings = 0;
  /// tie_word_embeddings: lm_head shares the token embedding. Defaults true
  /// for GPT-2, false for the Llama family, as transformers does.
  bool tie_word_embeddings = false;
  /// hidden_act ("silu"), GPT-2's activation_function ("gelu_new").
  std::string hidden_act;
  /// Biases of the attention projections: Llama's attention_bias sets all
  /// four; Qwen2 has q, k and v biases and no o bias; GPT-2 has all.
  bool q_bias = false, k_bias = false, v_bias = false, o_bias = false;
  /// mlp_bias (Llama; GPT-2 always).
  bool mlp_bias = false;
  /// A bias on the logits (no Hugging Face decoder has one; vkt-gpt's head
  /// does, and a model built in code may): "lm_head.bias" [vocab].
  bool lm_head_bias = false;
  std::optional<std::int64_t> bos_token_id;
  /// eos_token_id: one id or a list; empty when absent or null.
  std::vector<std::int64_t> eos_token_ids;
  /// torch_dtype ("bfloat16", "float32", ...); empty when absent.
  std::string torch_dtype;
  /// Mistral's (and Qwen2's with use_sliding_window) attention window: the
  /// caller refuses contexts beyond it. None when absent or null.
  std::optional<std::int64_t> sliding_window;
  /// The file's text as read, so that an export writes config.json back unchanged.
  std::string json_text;
};

/// Parses `text`, the contents of config.json at `path` (which errors name).
/// Throws vkt::Error for an unsupported architecture, a missing required field
/// (vocab_size, hidden_size, num_hidden_layers, num_attention_heads, and
/// intermediate_size for the Llama family), a field of the wrong type or
/// value, heads not dividing hidden_size, key/value heads not dividing heads,
/// an activation other than silu (Llama) / gelu_new (GPT-2), or a non-null rope_scaling.
DecoderConfig parse_decoder_config(const std::string& path, std::string_view text);

/// Reads `path`: a model directory (its config.json) or a config.json file.
DecoderConfig read_decoder_config(const std::string& path);

/// "Llama" or "Gpt2".
const char* to_string(Architecture architecture);

}  // namespace vkt::models
