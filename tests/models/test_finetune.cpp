// LoRA fine-tuning of a Hugging Face decoder: the merged export loads back as
// the fine-tuned model, the adapters go out in PEFT's layout, and a fine-tune
// on 2 towers trains what 1 tower does.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include <vktower/models/causal_lm.h>
#include <vktower/models/pretrained.h>
#include <vktower/models/safetensors_archive.h>
#include <vktower/models/text_dataset.h>
#include <vktower/tower/estimator.h>
#include <vktower/tower/replicate.h>

#include "../test_support.h"
#include "../tower_devices.h"
#include "decoder_check.h"
#include "tiny_models.h"

namespace models = vkt::models;
using vkt::test::TinyModel;

namespace {

/// `model`'s weights with random adapters on every default target, so the
/// adapted model differs from the base.
models::DecoderWeights with_adapters(const models::PretrainedDecoder& model, std::int64_t rank) {
  models::DecoderWeights weights = model.weights;
  std::uint32_t seed = 7;
  for (const models::WeightEntry& e : models::decoder_weight_entries(model.config)) {
    if (e.variable != e.module + "/kernel" ||
        !models::lora_targeted(e.module, models::default_lora_targets(model.config))) {
      continue;
    }
    const vkt::Shape shape = models::variable_shape(e);
    weights.set(
        e.module + "/lora_a", {shape[0], rank},
        vkt::test::random_floats(static_cast<std::size_t>(shape[0] * rank), seed++, -0.3f, 0.3f));
    weights.set(
        e.module + "/lora_b", {rank, shape[1]},
        vkt::test::random_floats(static_cast<std::size_t>(rank * shape[1]), seed++, -0.3f, 0.3f));
  }
  return weights;
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE(
    "a merged export loads back with the fine-tuned model's logits, and the adapters go out as "
    "PEFT's") {
  for (const TinyModel& m :
       {TinyModel{.layers = 1}, TinyModel{.architecture = models::Architecture::Gpt2,
                                .layers = 1,
                                .hidden = 36,
                                .heads = 3,
                                .kv_heads = 3,
                                .intermediate = 52}}) {
    const vkt::test::TempDir dir;
    vkt::test::write_tiny_model(dir.path / "base", m);
    const models::PretrainedDecoder model = models::load_pretrained((dir.path / "base").string());
    const models::DecoderOptions lora{
        .lora = vkt::layers::LoraOptions{.rank = 3, .alpha = 6.0f, .base_dtype = vkt::DType::F32}};
    const models::DecoderWeights tuned = with_adapters(model, 3);
    const auto values = [&](const std::string& name) { return tuned.values(name); };
    models::export_merged((dir.path / "merged").string(), model, lora, values);
    models::export_adapters((dir.path / "adapter").string(), model, lora, values, "base");

    const std::vector<std::int32_t> tokens{4, 9, 1, 30, 2, 8};
    const std::vector<float> adapted =
        vkt::test::device_logits(model.config, tuned, tokens, 1, lora);
    const models::PretrainedDecoder merged =
        models::load_pretrained((dir.path / "merged").string());
    const std::vector<float> reloaded =
        vkt::test::device_logits(merged.config, merged.weights, tokens, 1);
    const std::vector<float> base =
        vkt::test::device_logits(model.config, model.weights, tokens, 1);
    CHECK(vkt::test::norm_relative(reloaded, adapted) < 1e-5);
    CHECK(vkt::test::norm_relative(base, adapted) > 1e-2);  // the adapters matter
    CHECK(read_text(dir.path / "merged" / "config.json") ==
          read_text(dir.path / "base" / "config.json"));

    const auto config =
        nlohmann::json::parse(read_text(dir.path / "adapter" / "adapter_config.json"));
    CHECK(config.at("r") == 3);
    CHECK(config.at("lora_alpha") == 6.0);
    CHECK(config.at("peft_type") == "LORA");
    const bool gpt2 = m.architecture == models::Architecture::Gpt2;
    CHECK(config.at("fan_in_fan_out") == gpt2);
    const models::SafetensorsArchive adapters = models::SafetensorsArchive::open(
        (dir.path / "adapter" / "adapter_model.safetensors").string());
    const std::string module =
        gpt2 ? "transformer.h.0.attn.c_attn" : "model.layers.0.self_attn.k_proj";
    const std::int64_t in = m.hidden, out = gpt2 ? 3 * m.hidden : m.hidden / m.heads * m.kv_heads;
    CHECK(adapters.entry("base_model.model." + module + ".lora_A.weight").shape ==
          std::vector<std::int64_t>{3, in});
    CHECK(adapters.entry("base_model.model." + module + ".lora_B.weight").shape ==
          std::vector<std::int64_t>{out, 3});
    // PEFT's A [r, in] is vktower's lora_a [in, r] transposed.
    const std::vector<float> a =
        adapters.read_floats("base_model.model." + module + ".lora_A.weight");
    CHECK(a[1] == tuned.values(module + "/lora_a")[static_cast<std::size_t>(3)]);
  }
}

TEST_CASE("a LoRA fine-tune of a small Llama on 2 towers trains what 1 tower does") {
  const vkt::test::TempDir dir;
  vkt::test::write_tiny_model(dir.path / "base", {.layers = 1, .dtype = vkt::DType::BF16});
  auto model = std::make_shared<const models::PretrainedDecoder>(
      models::load_pretrained((dir.path / "base").string()));
  std::vector<std::int32_t> stream;
  for (int i = 0; i < 600; ++i) stream.push_back(static_cast<std::int32_t>((i * i + 3 * i) % 97));
  const vkt::Dataset train = models::token_windows(stream, 8, false);
  const models::CausalLmSettings settings{
      .decoder = {.lora = vkt::layers::LoraOptions{.rank = 4}}, .learning_rate = 1e-2, .steps = 4};
  const auto run = [&](int towers) {
    const vkt::test::TempDir model_dir;
    vkt::Estimator estimator(vkt::replicate_model_fn(models::causal_lm_model_fn(model, settings),
                                                     {.devices = std::vector<std::uint32_t>(
                                                          static_cast<std::size_t>(towers), 0)}),
                             vkt::test::quiet_config(model_dir.path.string(), 3));
    estimator.train(vkt::dataset_input(train, {.batch_size = 8,
                                               .epochs = 0,
                                               .shuffle_seed = 1,
                                               .drop_remainder = true,
                                               .label_columns = {"next"}}),
                    {.steps = 4});
    return std::pair{estimator.variable_value("model.layers.0.self_attn.q_proj/lora_b").f32,
                     estimator.variable_value("model.layers.0.self_attn.q_proj/kernel").f32};
  };
  const auto [one_b, one_base] = run(1);
  const auto [two_b, two_base] = run(2);
  CHECK(std::any_of(one_b.begin(), one_b.end(), [](float x) { return x != 0.0f; }));  // it trained
  // Two towers sum their halves' gradients in another order: float rounding only.
  CHECK(vkt::test::norm_relative(two_b, one_b) < 1e-4);
  CHECK(two_base == one_base);  // the frozen base is untouched
  CHECK(one_base == model->weights.values("model.layers.0.self_attn.q_proj/kernel"));
}
