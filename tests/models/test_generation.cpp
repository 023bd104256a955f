// Generation over the key/value cache against full recomputation, and the
// token choice (greedy, temperature, top-k).
#include <catch2/catch.hpp>

#include <vktower/models/generator.h>
#include <vktower/models/pretrained.h>
#include <vktower/runtime/vulkan/error.h>

#include "../test_support.h"
#include "decoder_check.h"
#include "tiny_models.h"

namespace models = vkt::models;
using vkt::test::TinyModel;

namespace {

/// Generates greedily with the cache, step by step, then runs the whole
/// sequence through the full decoder once: every step's logits must be the
/// full pass's row at that position, and every token its argmax.
void check_cache_against_recomputation(const TinyModel& m) {
  const vkt::test::TempDir dir;
  vkt::test::write_tiny_model(dir.path, m);
  const models::PretrainedDecoder model = models::load_pretrained(dir.path.string());
  const std::vector<std::int32_t> prompt{3, 17, 5};
  const std::int64_t length = 16;
  models::Generator generator(vkt::test::shared_device(), model.config, model.weights, {}, length);
  const std::vector<std::int32_t> generated =
      generator.generate(prompt, {.max_new_tokens = length - 3});
  REQUIRE(generated.size() == static_cast<std::size_t>(length - 3));
  CHECK(generator.position() == length - 1);  // the last token is picked, not run

  std::vector<std::int32_t> sequence = prompt;
  sequence.insert(sequence.end(), generated.begin(), generated.end() - 1);
  const std::vector<float> full =
      vkt::test::device_logits(model.config, model.weights, sequence, 1);
  const std::int64_t v = model.config.vocab_size;
  generator.reset();
  for (std::size_t i = 0; i < sequence.size(); ++i) {
    const std::vector<float> step = generator.step(sequence[i]);
    const std::vector<float> row(full.begin() + static_cast<std::ptrdiff_t>(i) * v,
                                 full.begin() + static_cast<std::ptrdiff_t>(i + 1) * v);
    CHECK(vkt::test::worst_error(step, std::vector<double>(row.begin(), row.end())) < 1e-4);
    if (i + 1 >= prompt.size()) {
      CHECK(models::pick_token(row, {}, 0.0) == generated[i + 1 - prompt.size()]);
    }
  }
}

}  // namespace

TEST_CASE("generation over the key/value cache gives the tokens and logits of full recomputation") {
  check_cache_against_recomputation({});  // Llama, grouped-query attention
  check_cache_against_recomputation({.architecture = models::Architecture::Gpt2,
                                     .hidden = 36,
                                     .heads = 3,
                                     .kv_heads = 3,
                                     .intermediate = 52});
}

TEST_CASE(
    "generation stops at a stop token and when the cache is full, and refuses a longer prompt") {
  const vkt::test::TempDir dir;
  vkt::test::write_tiny_model(dir.path, {.layers = 1});
  const models::PretrainedDecoder model = models::load_pretrained(dir.path.string());
  models::Generator generator(vkt::test::shared_device(), model.config, model.weights, {}, 6);
  const std::vector<std::int32_t> prompt{1, 2};
  const std::vector<std::int32_t> free = generator.generate(prompt, {.max_new_tokens = 10});
  CHECK(free.size() == 5);  // positions 2..5 run, and the last pick
  const std::vector<std::int32_t> stopped =
      generator.generate(prompt, {.max_new_tokens = 10, .stop_tokens = {free[1]}});
  CHECK(stopped == std::vector<std::int32_t>{free[0], free[1]});
  CHECK_THAT(
      vkt::test::error_of([&] { (void)generator.generate(std::vector<std::int32_t>(7, 1), {}); }),
      Catch::Matchers::Equals("generation: a prompt of 7 tokens does not fit a length of 6"));
}

TEST_CASE("a token is the argmax when greedy, and a draw among the top k otherwise") {
  const std::vector<float> logits{0.5f, 2.0f, 2.0f, -1.0f, 1.0f};
  CHECK(models::pick_token(logits, {}, 0.99) == 1);  // the lower id of the tie
  const models::GenerationOptions top2{.temperature = 1.0, .top_k = 2};
  // The two best are ids 1 and 2, equally likely: draws below 0.5 take 1.
  CHECK(models::pick_token(logits, top2, 0.49) == 1);
  CHECK(models::pick_token(logits, top2, 0.51) == 2);
  // All five at temperature 1: the last draw reaches the least likely, id 3.
  CHECK(models::pick_token(logits, {.temperature = 1.0}, 0.999) == 3);
}
