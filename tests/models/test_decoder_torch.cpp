// The decoders against PyTorch: checkpoints made by scripts/make_tiny_model.py
// (Hugging Face's layout, a SentencePiece tokenizer trained on the fortunes
// corpus) and logits from tests/models/torch_decoder_reference.py, a float64
// implementation of each architecture. Skipped where no python3 imports torch.
#include <catch2/catch.hpp>

#include <cstdlib>

#include <vktower/models/pretrained.h>
#include <vktower/models/tokenizer.h>
#include <vktower/runtime/io/npy.h>

#include "../test_support.h"
#include "../torch_support.h"
#include "decoder_check.h"

namespace models = vkt::models;

namespace {

/// Makes a model with `make_flags` in `dir`, runs the reference on two
/// sequences, and returns the worst relative error of the device's logits.
double error_against_torch(const std::string& python, const std::filesystem::path& dir,
                           const std::string& make_flags) {
  const std::filesystem::path source = vkt::test::source_dir();
  const std::string make = "'" + python + "' '" + (source / "scripts/make_tiny_model.py").string() +
                           "' '" + dir.string() + "' " + make_flags + " > /dev/null";
  REQUIRE(std::system(make.c_str()) == 0);
  const models::PretrainedDecoder model = models::load_pretrained(dir.string());
  std::vector<std::int32_t> tokens;
  std::string rows[2];
  for (int i = 0; i < 14; ++i) {
    const auto id = static_cast<std::int32_t>((i * 29 + 3) % model.config.vocab_size);
    tokens.push_back(id);
    std::string& row = rows[i / 7];
    if (!row.empty()) row += ',';
    row += std::to_string(id);
  }
  const std::filesystem::path out = dir / "logits.npy";
  const std::string reference = "'" + python + "' '" +
                                (source / "tests/models/torch_decoder_reference.py").string() +
                                "' '" + dir.string() + "' --batch-tokens '" + rows[0] + ";" +
                                rows[1] + "' --out '" + out.string() + "' > /dev/null";
  REQUIRE(std::system(reference.c_str()) == 0);
  const vkt::NpyArray want = vkt::read_npy(out.string());
  REQUIRE(want.shape == std::vector<std::int64_t>{2, 7, model.config.vocab_size});
  return vkt::test::worst_error(vkt::test::device_logits(model.config, model.weights, tokens, 2),
                                std::vector<double>(want.f32.begin(), want.f32.end()));
}

}  // namespace

TEST_CASE("a small Llama and GPT-2 made in Hugging Face's layout give PyTorch float64's logits",
          "[torch]") {
  const std::optional<std::string> python = vkt::test::torch_python();
  if (!python) {
    WARN(vkt::test::kNoTorch);
    return;
  }
  const vkt::test::TempDir dir;
  // Grouped-query attention (6 heads over 2), odd widths, bf16, two shards,
  // and a real tokenizer.model that load_tokenizer reads.
  CHECK(error_against_torch(
            *python, dir.path / "llama",
            "--arch llama --layers 2 --hidden 60 --heads 6 --kv-heads 2 "
            "--intermediate 70 --vocab 300 --dtype bf16 --shards 2 --init-std 0.2") < 1e-4);
  const auto tokenizer = models::load_tokenizer(dir.path / "llama");
  CHECK(tokenizer->vocab_size() == 300);
  CHECK(tokenizer->decode(tokenizer->encode("The fortune.", {.add_bos = false})) == "The fortune.");
  CHECK(error_against_torch(
            *python, dir.path / "qwen2",
            "--arch llama --model-type qwen2 --layers 1 --hidden 48 --heads 4 "
            "--kv-heads 2 --intermediate 64 --vocab 300 --tie --tokenizer none --init-std 0.2") <
        1e-4);
  CHECK(error_against_torch(
            *python, dir.path / "gpt2",
            "--arch gpt2 --layers 2 --hidden 48 --heads 4 --vocab 300 --dtype f16 --init-std 0.2") <
        1e-4);
}
