// config.json of the supported decoder families read as transformers reads
// them (defaults included), every unusable config refused naming the file and
// field; PEFT's adapter_config.json written with the fields PEFT loads.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include <vktower/models/hf_config.h>
#include <vktower/models/peft_adapter.h>
#include <vktower/models/safetensors_archive.h>

#include "../test_support.h"

using Catch::Matchers::Contains;
using vkt::models::Architecture;
using vkt::models::parse_decoder_config;
using vkt::test::TempDir;

namespace {

// A Llama config (TinyLlama's shape) with `extra` fields added before the end.
std::string llama_config(const std::string& extra = "") {
  return R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "vocab_size": 32000, "hidden_size": 2048, "intermediate_size": 5632,
    "num_hidden_layers": 22, "num_attention_heads": 32, "num_key_value_heads": 4,
    "rms_norm_eps": 1e-05, "max_position_embeddings": 2048, "hidden_act": "silu",
    "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16", "rope_scaling": null)" +
         extra + "}";
}

std::string error_for(const std::string& text) {
  return vkt::test::error_of([&] { (void)parse_decoder_config("/m/config.json", text); });
}

}  // namespace

TEST_CASE("a Llama config.json is read with transformers defaults") {
  TempDir dir;
  std::ofstream(dir / "config.json") << llama_config();
  const vkt::models::DecoderConfig c = vkt::models::read_decoder_config(dir.path.string());
  CHECK(c.path == dir / "config.json");
  CHECK(c.architecture == Architecture::Llama);
  CHECK(c.architecture_name == "LlamaForCausalLM");
  CHECK(c.family == "llama");
  CHECK(c.vocab_size == 32000);
  CHECK(c.hidden_size == 2048);
  CHECK(c.intermediate_size == 5632);
  CHECK(c.num_hidden_layers == 22);
  CHECK(c.num_attention_heads == 32);
  CHECK(c.num_key_value_heads == 4);
  CHECK(c.head_dim == 64);
  CHECK(c.norm_eps == 1e-5);
  CHECK(c.rope_theta == 10000);
  CHECK_FALSE(c.tie_word_embeddings);
  CHECK_FALSE((c.q_bias || c.k_bias || c.v_bias || c.o_bias || c.mlp_bias));
  CHECK(c.bos_token_id == 1);
  CHECK(c.eos_token_ids == std::vector<std::int64_t>{2});
  CHECK(c.torch_dtype == "bfloat16");
  CHECK_FALSE(c.sliding_window);
  CHECK(c.json_text == llama_config());

  std::string listed_eos = llama_config(R"(, "attention_bias": true, "head_dim": 128,
        "rope_theta": 500000.0, "tie_word_embeddings": true)");
  listed_eos.replace(listed_eos.find("\"eos_token_id\": 2"), 17, R"("eos_token_id": [2, 7])");
  const auto biased = parse_decoder_config("/m/config.json", listed_eos);
  CHECK((biased.q_bias && biased.k_bias && biased.v_bias && biased.o_bias));
  CHECK(biased.eos_token_ids == std::vector<std::int64_t>{2, 7});
  CHECK(biased.head_dim == 128);
  CHECK(biased.rope_theta == 500000.0);
  CHECK(biased.tie_word_embeddings);
}

TEST_CASE("Mistral and Qwen2 configs are the Llama family with their window and biases") {
  const auto mistral = parse_decoder_config("/m/config.json", R"({
    "architectures": ["MistralForCausalLM"], "model_type": "mistral", "vocab_size": 32000,
    "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "sliding_window": 4096})");
  CHECK(mistral.architecture == Architecture::Llama);
  CHECK(mistral.family == "mistral");
  CHECK(mistral.sliding_window == 4096);
  CHECK(mistral.norm_eps == 1e-6);
  CHECK(mistral.max_position_embeddings == 2048);

  const auto qwen = parse_decoder_config("/m/config.json", R"({
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": 151936,
    "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
    "num_attention_heads": 14, "num_key_value_heads": 2, "rope_theta": 1000000.0,
    "tie_word_embeddings": true, "use_sliding_window": false, "sliding_window": 32768,
    "eos_token_id": 151643, "bos_token_id": null})");
  CHECK(qwen.family == "qwen2");
  CHECK((qwen.q_bias && qwen.k_bias && qwen.v_bias));
  CHECK_FALSE((qwen.o_bias || qwen.mlp_bias));
  CHECK(qwen.tie_word_embeddings);
  CHECK(qwen.head_dim == 64);
  CHECK_FALSE(qwen.sliding_window);  // use_sliding_window false: no window in effect
  CHECK_FALSE(qwen.bos_token_id);
}

TEST_CASE("a GPT-2 config.json is read under GPT-2's own field names") {
  const auto gpt2 = parse_decoder_config("/m/config.json", R"({
    "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": 50257,
    "n_embd": 768, "n_layer": 12, "n_head": 12, "n_inner": null, "n_positions": 1024,
    "layer_norm_epsilon": 1e-05, "activation_function": "gelu_new",
    "bos_token_id": 50256, "eos_token_id": 50256})");
  CHECK(gpt2.architecture == Architecture::Gpt2);
  CHECK(gpt2.architecture_name == "GPT2LMHeadModel");
  CHECK(gpt2.hidden_size == 768);
  CHECK(gpt2.intermediate_size == 3072);
  CHECK(gpt2.num_key_value_heads == 12);
  CHECK(gpt2.head_dim == 64);
  CHECK(gpt2.tie_word_embeddings);
  CHECK(gpt2.hidden_act == "gelu_new");
  CHECK((gpt2.q_bias && gpt2.o_bias && gpt2.mlp_bias));
  // model_type alone names the family too.
  CHECK(parse_decoder_config("/m/config.json", R"({"model_type": "gpt2", "vocab_size": 10,
    "n_embd": 8, "n_layer": 1, "n_head": 2})")
            .max_position_embeddings == 1024);
}

TEST_CASE("an unusable config.json is refused naming the file and the field") {
  const std::string p = "config '/m/config.json': ";
  CHECK(error_for(R"({"architectures": ["BertForMaskedLM"]})") ==
        p + "architecture \"BertForMaskedLM\" is not supported (vktower builds LlamaForCausalLM, "
            "MistralForCausalLM, Qwen2ForCausalLM, GPT2LMHeadModel)");
  CHECK(error_for(R"({"model_type": "t5"})") ==
        p + "model_type \"t5\" is not supported (vktower builds LlamaForCausalLM, "
            "MistralForCausalLM, Qwen2ForCausalLM, GPT2LMHeadModel)");
  CHECK_THAT(error_for("{}"), Contains("\"architectures\" and \"model_type\" are both missing"));
  CHECK(error_for(R"({"model_type": "llama", "vocab_size": 10})") ==
        p + "field \"hidden_size\" is missing (add it: the model's config.json from its Hugging "
            "Face repository has it)");
  CHECK(error_for(llama_config(R"(, "hidden_size": "2048")")) ==
        "config '/m/config.json': key \"hidden_size\" appears twice in one object (a damaged or "
        "hand-edited file; keep one)");
  CHECK(error_for(R"({"model_type": "llama", "vocab_size": 10, "hidden_size": "2048"})") ==
        p + "field \"hidden_size\" is \"\\\"2048\\\"\", not an integer >= 1 (fix the value)");
  const std::string base = R"({"model_type": "llama", "vocab_size": 10, "intermediate_size": 8,
    "num_hidden_layers": 1, )";
  CHECK(error_for(base + R"("hidden_size": 10, "num_attention_heads": 4})") ==
        p + "\"num_attention_heads\" 4 does not divide the hidden size 10 (fix either field)");
  CHECK(error_for(base + R"("hidden_size": 8, "num_attention_heads": 4,
    "num_key_value_heads": 3})") ==
        p + "\"num_key_value_heads\" 3 does not divide \"num_attention_heads\" 4 (fix either "
            "field)");
  std::string scaled = llama_config();
  scaled.replace(scaled.find("null"), 4, R"({"rope_type": "llama3", "factor": 8.0})");
  CHECK(error_for(scaled) ==
        p + "rope_scaling is not supported (vktower's rotary positions are unscaled: use a model "
            "without it)");
  CHECK(error_for(base + R"("hidden_size": 8, "num_attention_heads": 4, "hidden_act": "gelu"})") ==
        p + "field \"hidden_act\" is \"gelu\"; vktower's llama decoder runs \"silu\" only");
  CHECK(error_for(base + R"("hidden_size": 8, "num_attention_heads": 4,
    "tie_word_embeddings": 1})") ==
        p + "field \"tie_word_embeddings\" is \"1\", not true or false (fix the value)");
  CHECK(error_for("[1]") == p + "it is not a JSON object (is this a config.json?)");
  CHECK_THAT(vkt::test::error_of([] { (void)vkt::models::read_decoder_config("/no/such/dir"); }),
             Contains("config '/no/such/dir' cannot be read"));
}

TEST_CASE("LoRA adapters are written in PEFT's layout") {
  TempDir dir;
  const vkt::models::LoraAdapterConfig config{.base_model_name_or_path = "gpt2",
                                              .r = 2,
                                              .lora_alpha = 4,
                                              .lora_dropout = 0.05,
                                              .target_modules = {"c_attn"},
                                              .fan_in_fan_out = true};
  const std::string a = vkt::models::lora_weight_name("transformer.h.0.attn.c_attn", false);
  const std::string b = vkt::models::lora_weight_name("transformer.h.0.attn.c_attn", true);
  CHECK(a == "base_model.model.transformer.h.0.attn.c_attn.lora_A.weight");
  CHECK(b == "base_model.model.transformer.h.0.attn.c_attn.lora_B.weight");
  const std::vector<vkt::models::TensorToWrite> tensors{
      {.name = a, .shape = {2, 3}, .values = {1, 2, 3, 4, 5, 6}},
      {.name = b, .shape = {9, 2}, .values = std::vector<float>(18, 0.5f)}};
  vkt::models::write_lora_adapter(dir / "adapter", config, tensors);
  const std::string json = vkt::test::read_file(dir.path / "adapter" / "adapter_config.json");
  for (const char* field :
       {R"("peft_type": "LORA")", R"("task_type": "CAUSAL_LM")", R"("r": 2)",
        R"("lora_alpha": 4.0)", R"("lora_dropout": 0.05)", R"("target_modules": [)",
        R"("bias": "none")", R"("fan_in_fan_out": true)", R"("base_model_name_or_path": "gpt2")",
        R"("inference_mode": true)"}) {
    CHECK_THAT(json, Contains(field));
  }
  const auto archive =
      vkt::models::SafetensorsArchive::open(dir / "adapter/adapter_model.safetensors");
  CHECK(archive.entry(b).shape == std::vector<std::int64_t>{9, 2});
  CHECK(archive.read_floats(a) == tensors[0].values);
  CHECK_THAT(vkt::test::error_of([&] {
               (void)vkt::models::lora_adapter_config_json({.r = 0, .target_modules = {"q"}});
             }),
             Contains("LoRA adapter config: r 0 must be >= 1"));
}
