// SentencePieceTokenizer: a model trained here on the fortunes corpus encodes
// every fortune to the ids Debian's python3-sentencepiece gives, decodes them
// back to the fortune, and loads through load_tokenizer with Llama's BOS default.
#include <sentencepiece_trainer.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <vktower/models/sentencepiece_tokenizer.h>
#include <vktower/models/tokenizer.h>

#include "tokenizer_support.h"

using vkt::models::SentencePieceTokenizer;
using vkt::test::fortunes;
using vkt::test::TempDir;

namespace {

/// A 1000-piece BPE model trained on the corpus once per process, as Llama's
/// are made: byte fallback (so newlines and rare characters survive), no
/// normalization, white space kept.
const std::filesystem::path& trained_model() {
  static TempDir dir;
  static const std::filesystem::path model = [] {
    const std::filesystem::path lines = dir.path / "lines.txt";
    std::ofstream out(lines, std::ios::binary);
    for (const std::string& fortune : fortunes()) {
      std::istringstream in(fortune);
      for (std::string line; std::getline(in, line);) {
        if (!line.empty()) out << line << '\n';
      }
    }
    out.close();
    const auto status = sentencepiece::SentencePieceTrainer::Train(
        "--input=" + lines.string() + " --model_prefix=" + (dir.path / "fortunes").string() +
        " --vocab_size=1000 --model_type=bpe --byte_fallback=true"
        " --normalization_rule_name=identity --remove_extra_whitespaces=false"
        " --input_sentence_size=10000 --shuffle_input_sentence=true --num_threads=2"
        " --minloglevel=2");
    INFO(status.ToString());
    REQUIRE(status.ok());
    return dir.path / "fortunes.model";
  }();
  return model;
}

/// The first interpreter that imports sentencepiece: $VKT_PYTHON, python3,
/// /usr/bin/python3 (Debian's python3-sentencepiece is for the system Python).
std::string sentencepiece_python() {
  std::vector<std::string> candidates{"python3", "/usr/bin/python3"};
  if (const char* env = std::getenv("VKT_PYTHON"); env != nullptr && *env != '\0') {
    candidates.insert(candidates.begin(), env);
  }
  for (const std::string& python : candidates) {
    const std::string probe = "'" + python + "' -c 'import sentencepiece' >/dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) return python;
  }
  return {};
}

std::string joined(const std::vector<std::int32_t>& ids) {
  std::string line;
  for (const std::int32_t id : ids) line += (line.empty() ? "" : " ") + std::to_string(id);
  return line;
}

}  // namespace

TEST_CASE("SentencePieceTokenizer gives python3-sentencepiece's ids for every fortune",
          "[models][tokenizer]") {
  const std::string python = sentencepiece_python();
  if (python.empty()) {
    WARN(
        "skipped: no python3 here imports sentencepiece (apt-get install python3-sentencepiece, "
        "or set VKT_PYTHON to an interpreter that has it)");
    return;
  }
  const SentencePieceTokenizer tokenizer(trained_model());
  TempDir dir;
  {
    std::ofstream texts(dir / "texts.bin", std::ios::binary);  // NUL-separated
    for (std::size_t i = 0; i < fortunes().size(); ++i) {
      if (i > 0) texts.put('\0');
      texts << fortunes()[i];
    }
  }
  const std::string script =
      (vkt::test::source_dir() / "tests" / "models" / "sentencepiece_reference.py").string();
  const std::string command = "'" + python + "' '" + script + "' '" + trained_model().string() +
                              "' '" + (dir / "texts.bin") + "' '" + (dir / "ids.txt") + "'";
  REQUIRE(std::system(command.c_str()) == 0);
  std::ifstream reference(dir / "ids.txt");
  std::size_t compared = 0;
  for (const std::string& fortune : fortunes()) {
    std::string expected;
    REQUIRE(std::getline(reference, expected));
    INFO(fortune);
    REQUIRE(joined(tokenizer.encode(fortune)) == expected);
    ++compared;
  }
  CHECK(compared == fortunes().size());
}

TEST_CASE("SentencePieceTokenizer decodes every fortune's ids back to the fortune",
          "[models][tokenizer]") {
  const SentencePieceTokenizer tokenizer(trained_model());
  CHECK(tokenizer.vocab_size() == 1000);
  for (const std::string& fortune : fortunes()) {
    INFO(fortune);
    REQUIRE(tokenizer.decode(tokenizer.encode(fortune)) == fortune);
  }
  for (const std::string text : {"", " ", "  two  spaces  ", "\n\ttabs\n", "naïve café ☕ 日本"}) {
    REQUIRE(tokenizer.decode(tokenizer.encode(text)) == text);
  }
}

TEST_CASE("load_tokenizer reads tokenizer.model first and adds BOS as Llama does",
          "[models][tokenizer]") {
  TempDir dir;
  std::filesystem::copy_file(trained_model(), dir.path / "tokenizer.model");
  vkt::test::write_file(dir.path / "tokenizer.json", std::string("not read: tokenizer.model wins"));
  const auto tokenizer = vkt::models::load_tokenizer(dir.path);
  REQUIRE(dynamic_cast<const SentencePieceTokenizer*>(tokenizer.get()) != nullptr);
  // The trainer's defaults: <unk> 0, <s> 1, </s> 2.
  CHECK(tokenizer->bos_id() == 1);
  CHECK(tokenizer->eos_id() == 2);
  const auto bare = tokenizer->encode("Hello world", {.add_bos = false});
  auto with_bos = bare;
  with_bos.insert(with_bos.begin(), 1);
  CHECK(tokenizer->encode("Hello world") == with_bos);
  auto with_both = with_bos;
  with_both.push_back(2);
  CHECK(tokenizer->encode("Hello world", {.add_eos = true}) == with_both);
  CHECK(tokenizer->decode(with_both) == "Hello world");  // control ids decode to nothing
  CHECK(tokenizer->id_to_piece(1) == "<s>");
  CHECK(tokenizer->piece_to_id("</s>") == 2);
  CHECK(tokenizer->piece_to_id("no such piece") == std::nullopt);

  vkt::test::write_file(dir.path / "tokenizer_config.json",
                        std::string(R"({"add_bos_token": false, "add_eos_token": true,
                                        "eos_token": {"content": "<s>", "lstrip": false}})"));
  const auto configured = vkt::models::load_tokenizer(dir.path);
  CHECK(configured->eos_id() == 1);
  auto with_eos = bare;
  with_eos.push_back(1);
  CHECK(configured->encode("Hello world") == with_eos);
}

TEST_CASE("SentencePieceTokenizer errors name the model file", "[models][tokenizer]") {
  using vkt::test::error_of;
  TempDir dir;
  const std::string missing = dir / "missing.model";
  CHECK(error_of([&] { SentencePieceTokenizer{missing}; }) ==
        "cannot read '" + missing + "'; check that it exists and is readable");
  const std::string garbage = dir / "garbage.model";
  vkt::test::write_file(garbage, std::string("\x0a\xff\xff\xff\xff this is no model"));
  CHECK(error_of([&] {
          SentencePieceTokenizer{garbage};
        }).starts_with("SentencePiece model '" + garbage + "' could not be loaded ("));
  // A model cut short is refused too, not read past its end.
  const std::string model = vkt::test::read_file(trained_model());
  const std::string cut = dir / "cut.model";
  vkt::test::write_file(cut, model.substr(0, model.size() / 2));
  CHECK(error_of([&] {
          SentencePieceTokenizer{cut};
        }).starts_with("SentencePiece model '" + cut + "' could not be loaded ("));
  const SentencePieceTokenizer tokenizer(trained_model());
  const std::vector<std::int32_t> bad{5, 1000};
  CHECK(error_of([&] { tokenizer.decode(bad); }) ==
        "SentencePiece model '" + trained_model().string() +
            "': id 1000 is outside the vocabulary [0, 1000)");
}
