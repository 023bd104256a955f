#pragma once
// Small decoders in Hugging Face's layout, made in the test: a config.json
// with the real field names and a checkpoint of random weights under the real
// names (model.safetensors, or shards), plus the values as doubles.

#include <fmt/format.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <vktower/models/decoder_weights.h>
#include <vktower/models/hf_config.h>
#include <vktower/models/safetensors_writer.h>
#include <vktower/runtime/graph/half.h>

#include "decoder_reference.h"

namespace vkt::test {

/// The sizes of a tiny model (odd widths, grouped-query attention by default).
struct TinyModel {
  models::Architecture architecture = models::Architecture::Llama;
  std::int64_t layers = 2, hidden = 36, heads = 6, kv_heads = 2, intermediate = 70, vocab = 97;
  std::int64_t positions = 64;
  bool tie = false;
  bool qkv_bias = false;  ///< Qwen2's q, k and v biases
  DType dtype = DType::F32;
  std::uint64_t max_shard_bytes = 5'000'000'000;
  std::uint32_t seed = 1;
};

inline std::string tiny_config_json(const TinyModel& m) {
  if (m.architecture == models::Architecture::Gpt2) {
    return fmt::format(
        R"({{"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": {}, "n_layer": {},
"n_head": {}, "n_positions": {}, "n_ctx": {}, "n_inner": {}, "vocab_size": {},
"layer_norm_epsilon": 1e-05, "activation_function": "gelu_new", "bos_token_id": 0,
"eos_token_id": 1, "tie_word_embeddings": true}})",
        m.hidden, m.layers, m.heads, m.positions, m.positions, m.intermediate, m.vocab);
  }
  return fmt::format(
      R"({{"architectures": ["{}"], "model_type": "{}", "hidden_size": {}, "intermediate_size": {},
"num_hidden_layers": {}, "num_attention_heads": {}, "num_key_value_heads": {},
"rms_norm_eps": 1e-06, "rope_theta": 10000.0, "max_position_embeddings": {}, "vocab_size": {},
"tie_word_embeddings": {}, "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2,
"torch_dtype": "float32", "rope_scaling": null}})",
      m.qkv_bias ? "Qwen2ForCausalLM" : "LlamaForCausalLM", m.qkv_bias ? "qwen2" : "llama",
      m.hidden, m.intermediate, m.layers, m.heads, m.kv_heads, m.positions, m.vocab,
      m.tie ? "true" : "false");
}

inline void write_text_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

/// Writes `m` into `dir` (config.json and the checkpoint) and returns its
/// values as the checkpoint holds them (rounded to m.dtype), by Hugging Face name.
inline HfTensors write_tiny_model(const std::filesystem::path& dir, const TinyModel& m) {
  std::filesystem::create_directories(dir);
  const std::string json = tiny_config_json(m);
  write_text_file(dir / "config.json", json);
  const models::DecoderConfig config =
      models::parse_decoder_config((dir / "config.json").string(), json);
  std::mt19937 random(m.seed);
  std::normal_distribution<float> normal(0.0f, 0.2f);
  HfTensors values;
  std::vector<models::TensorToWrite> tensors;
  for (const models::WeightEntry& e : models::decoder_weight_entries(config)) {
    std::vector<float> v(static_cast<std::size_t>(e.hf_shape.elements()));
    const bool norm = e.variable.ends_with("/gamma");
    for (float& x : v) x = norm ? 1.0f + 0.5f * normal(random) : normal(random);
    if (m.dtype != DType::F32) {
      for (float& x : v) {
        x = m.dtype == DType::BF16 ? bf16_to_f32(f32_to_bf16(x)) : f16_to_f32(f32_to_f16(x));
      }
    }
    values[e.hf_name] = std::vector<double>(v.begin(), v.end());
    tensors.push_back(models::TensorToWrite{
        .name = e.hf_name, .shape = e.hf_shape.dims(), .dtype = m.dtype, .values = std::move(v)});
  }
  models::write_checkpoint(dir.string(), tensors, {.max_shard_bytes = m.max_shard_bytes});
  return values;
}

}  // namespace vkt::test
