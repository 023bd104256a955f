// The Llama-family and GPT-2 decoders built from Hugging Face files against
// a double reference of the same architecture, and the loader's errors.
#include <catch2/catch.hpp>

#include <vktower/models/decoder.h>
#include <vktower/models/pretrained.h>
#include <vktower/runtime/vulkan/error.h>

#include "../test_support.h"
#include "decoder_check.h"
#include "decoder_reference.h"
#include "tiny_models.h"

using Catch::Matchers::Equals;
using vkt::test::TinyModel;
namespace models = vkt::models;

namespace {

/// Two sequences of `t` tokens below `vocab`.
std::vector<std::int32_t> two_sequences(std::int64_t t, std::int64_t vocab) {
  std::vector<std::int32_t> tokens;
  for (std::int64_t i = 0; i < 2 * t; ++i) {
    tokens.push_back(static_cast<std::int32_t>((i * 37 + 11) % vocab));
  }
  return tokens;
}

/// The reference's logits of both sequences, one after the other.
std::vector<double> reference_logits(const models::DecoderConfig& config,
                                     const vkt::test::HfTensors& values,
                                     const std::vector<std::int32_t>& tokens) {
  const vkt::test::DecoderReference reference(config, values);
  const std::size_t t = tokens.size() / 2;
  std::vector<double> out = reference.logits({tokens.begin(), tokens.begin() + t});
  const std::vector<double> second = reference.logits({tokens.begin() + t, tokens.end()});
  out.insert(out.end(), second.begin(), second.end());
  return out;
}

double loaded_error(const TinyModel& m, std::int64_t t) {
  const vkt::test::TempDir dir;
  const vkt::test::HfTensors values = vkt::test::write_tiny_model(dir.path, m);
  const models::PretrainedDecoder model = models::load_pretrained(dir.path.string());
  const std::vector<std::int32_t> tokens = two_sequences(t, m.vocab);
  return vkt::test::worst_error(vkt::test::device_logits(model.config, model.weights, tokens, 2),
                                reference_logits(model.config, values, tokens));
}

}  // namespace

TEST_CASE(
    "a small Llama with grouped-query attention loaded from sharded files gives the reference's "
    "logits") {
  // 6 query heads over 2 key/value heads of 6, widths 36 and 70, in three shards.
  CHECK(loaded_error({.max_shard_bytes = 40000}, 9) < 1e-4);
}

TEST_CASE(
    "a Llama of bf16 weights with a tied head, and a Qwen2 with q k v biases, give the reference's "
    "logits") {
  CHECK(loaded_error({.tie = true, .dtype = vkt::DType::BF16}, 7) < 1e-4);
  CHECK(loaded_error({.heads = 3, .kv_heads = 3, .qkv_bias = true, .seed = 5}, 6) < 1e-4);
}

TEST_CASE("a small GPT-2 loaded from Hugging Face files gives the reference's logits") {
  const TinyModel gpt2{.architecture = models::Architecture::Gpt2,
                       .hidden = 36,
                       .heads = 3,
                       .kv_heads = 3,
                       .intermediate = 52,
                       .dtype = vkt::DType::F16};
  CHECK(loaded_error(gpt2, 8) < 1e-4);
}

TEST_CASE("a checkpoint that does not match its config is refused naming the entry and the file") {
  const vkt::test::TempDir dir;
  const TinyModel m{.layers = 1};
  vkt::test::write_tiny_model(dir.path, m);
  const std::string file = (dir.path / "model.safetensors").string();
  const std::string config = (dir.path / "config.json").string();
  // One layer more in config.json: the checkpoint lacks its weights.
  TinyModel deeper = m;
  deeper.layers = 2;
  vkt::test::write_text_file(dir.path / "config.json", vkt::test::tiny_config_json(deeper));
  CHECK_THAT(vkt::test::error_of([&] { (void)models::load_pretrained(dir.path.string()); }),
             Equals(file +
                    ": the checkpoint has no entry 'model.layers.1.input_layernorm.weight', "
                    "which a LlamaForCausalLM model with this config.json (" +
                    config + ") needs; is the checkpoint complete?"));
  // Another width: the first entry's shape is wrong.
  TinyModel wider = m;
  wider.hidden = 48;
  vkt::test::write_text_file(dir.path / "config.json", vkt::test::tiny_config_json(wider));
  const std::string shape =
      vkt::test::error_of([&] { (void)models::load_pretrained(dir.path.string()); });
  CHECK_THAT(shape, Catch::Matchers::Contains("model.embed_tokens.weight") &&
                        Catch::Matchers::Contains(config));
  // A GPT-2 config over a Llama checkpoint: an entry it has no weight for.
  vkt::test::write_text_file(
      dir.path / "config.json",
      vkt::test::tiny_config_json(
          {.architecture = models::Architecture::Gpt2, .layers = 1, .hidden = 36, .heads = 6}));
  CHECK_THAT(vkt::test::error_of([&] { (void)models::load_pretrained(dir.path.string()); }),
             Equals(file +
                    ": entry 'model.embed_tokens.weight' is not a weight of a "
                    "GPT2LMHeadModel model (" +
                    config +
                    "); is this checkpoint for another architecture, or config.json "
                    "for another model?"));
}

TEST_CASE("LoRA adapters targets match as PEFT's target_modules do") {
  const std::vector<std::string> targets{"q_proj", "attn.c_proj"};
  CHECK(models::lora_targeted("model.layers.0.self_attn.q_proj", targets));
  CHECK(models::lora_targeted("transformer.h.3.attn.c_proj", targets));
  CHECK_FALSE(models::lora_targeted("transformer.h.3.mlp.c_proj", targets));
  CHECK_FALSE(models::lora_targeted("model.layers.0.self_attn.qq_proj", targets));
}
