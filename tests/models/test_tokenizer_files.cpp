// load_tokenizer and the BPE file readers on folders and files that are wrong:
// every message in full, and no malformed file escaping as anything but vkt::Error.
#include <vktower/models/bpe_tokenizer.h>
#include <vktower/models/tokenizer.h>

#include "bpe_fixture.h"

using vkt::models::load_tokenizer;
using vkt::test::error_of;
using vkt::test::Merges;
using vkt::test::TempDir;

namespace {

const Merges kMerges{{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"Ġ", "w"}};

void write(const TempDir& dir, const std::string& name, const std::string& contents) {
  vkt::test::write_file(dir.path / name, contents);
}

/// tokenizer.json for kMerges with `from` replaced by `to`, which must occur in it.
std::string edited_tokenizer_json(const std::string& from, const std::string& to) {
  std::string text = vkt::test::tokenizer_json(kMerges, false);
  const std::size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("load_tokenizer names the folder and the files it looked for", "[models][tokenizer]") {
  TempDir dir;
  const std::string missing = dir / "no-such-model";
  CHECK(error_of([&] { load_tokenizer(missing); }) ==
        "model folder '" + missing +
            "' is not a directory; pass the folder that holds the model's tokenizer files");
  write(dir, "config.json", R"({"bos_token_id": 1})");
  write(dir, "vocab.json", "{}");  // without merges.txt it is no tokenizer
  CHECK(error_of([&] { load_tokenizer(dir.path); }) ==
        "model folder '" + dir.path.string() +
            "' has no tokenizer: looked for tokenizer.model (SentencePiece), tokenizer.json "
            "(byte-level BPE) and vocab.json with merges.txt (byte-level BPE)");
}

TEST_CASE("tokenizer.json errors name the file and the field", "[models][tokenizer]") {
  TempDir dir;
  const std::string path = dir / "tokenizer.json";
  const std::string file = "tokenizer.json '" + path + "'";
  const auto error_with = [&](const std::string& contents) {
    write(dir, "tokenizer.json", contents);
    return error_of([&] { load_tokenizer(dir.path); });
  };
  CHECK(error_with("{x") ==
        "'" + path +
            "' is not valid JSON: [json.exception.parse_error.101] parse error at line 1, column "
            "2: syntax error while parsing object key - invalid literal; last read: '{x'; "
            "expected string literal");
  CHECK(error_with("[1, 2]") == file + " is array, not an object");
  CHECK(error_with(edited_tokenizer_json(R"("type": "BPE")", R"("type": "WordPiece")")) ==
        file +
            ": model.type is \"WordPiece\"; vktower reads byte-level BPE tokenizers only "
            "(model.type \"BPE\"); use the model's tokenizer.model (SentencePiece) if it has one");
  CHECK(error_with(edited_tokenizer_json(R"({"type": "ByteLevel", "add_prefix_space")",
                                         R"({"type": "Metaspace", "add_prefix_space")")) ==
        file +
            ": pre_tokenizer.type is \"Metaspace\"; vktower's BPE supports only the ByteLevel "
            "pre-tokenizer (GPT-2's)");
  CHECK(error_with(
            edited_tokenizer_json(R"("normalizer": null)", R"("normalizer": {"type": "NFC"})")) ==
        file +
            ": normalizer is \"NFC\"; vktower's BPE supports tokenizers without a normalizer "
            "(null) only");
  CHECK(
      error_with(edited_tokenizer_json(R"("byte_fallback": false)", R"("byte_fallback": true)")) ==
      file +
          ": model.byte_fallback is true; vktower's BPE supports only byte-level models "
          "(byte_fallback false)");
  CHECK(error_with(edited_tokenizer_json(R"("h e")", R"("h zz")")) ==
        file +
            ": merge 0 ('h zz') names 'zz', which is not in the vocabulary; the merges and "
            "the vocabulary do not match");
  CHECK(error_with(edited_tokenizer_json(R"("h e")", R"("h e x")")) ==
        file + ": model.merges[0] is 'h e x', not two tokens separated by one space");
  CHECK(error_with(edited_tokenizer_json(R"("h e")", "7")) ==
        file + ": model.merges[0] is 7, neither \"left right\" nor [\"left\", \"right\"]");
  CHECK(error_with(edited_tokenizer_json(R"("A": 65)", R"("A": "sixty-five")")) ==
        file + ": model.vocab: the id of 'A' is \"sixty-five\", not an integer in [0, 2^31)");
  CHECK(error_with(edited_tokenizer_json(R"("A": 65)", R"("A": 66)")) ==
        file + ": id 66 is given to both 'A' and 'B'; each id names one token");
  CHECK(error_with(edited_tokenizer_json(
            R"("added_tokens": [])",
            R"("added_tokens": [{"id": 300, "content": "<x>", "single_word": true}])")) ==
        file +
            ": added_tokens[0].single_word is true; vktower matches added tokens anywhere "
            "(single_word false) only");
  CHECK(error_with(
            edited_tokenizer_json(R"("added_tokens": [])", R"("added_tokens": [{"id": 300}])")) ==
        file + ": added_tokens[0] is not an object with an integer id and a string content");
}

TEST_CASE("vocab.json, merges.txt and config errors name the file and the line",
          "[models][tokenizer]") {
  TempDir dir;
  const std::string source =
      "vocab.json '" + (dir / "vocab.json") + "' with merges.txt '" + (dir / "merges.txt") + "'";
  write(dir, "vocab.json", vkt::test::vocab_json(vkt::test::bpe_vocab(kMerges)));
  write(dir, "merges.txt", "#version: 0.2\nh e\nll\n");
  CHECK(error_of([&] { load_tokenizer(dir.path); }) ==
        "merges.txt '" + (dir / "merges.txt") +
            "': line 3 is 'll', not two tokens separated by one space");
  write(dir, "merges.txt", "h e\nhe llo\n");
  CHECK(error_of([&] { load_tokenizer(dir.path); }) ==
        source +
            ": merge 1 ('he llo') names 'llo', which is not in the vocabulary; the merges "
            "and the vocabulary do not match");
  write(dir, "merges.txt", "h e\nl o\n");
  CHECK(error_of([&] { load_tokenizer(dir.path); }) ==
        source +
            ": merge 1 ('l o') makes 'lo', which is not in the vocabulary; the merges and "
            "the vocabulary do not match");
  write(dir, "merges.txt", vkt::test::merges_txt(kMerges));
  write(dir, "tokenizer_config.json", R"({"bos_token": "<s>"})");
  CHECK(error_of([&] { load_tokenizer(dir.path); }) ==
        source +
            ": the special token '<s>' is not in the vocabulary; add it to vocab.json or "
            "remove it from the config");
  write(dir, "tokenizer_config.json", R"({"add_bos_token": "yes"})");
  CHECK(error_of([&] { load_tokenizer(dir.path); }) ==
        "'" + (dir / "tokenizer_config.json") + "': add_bos_token is \"yes\", not true or false");
  write(dir, "tokenizer_config.json", R"({"add_bos_token": true})");
  CHECK(error_of([&] { load_tokenizer(dir.path); }) ==
        "model folder '" + dir.path.string() +
            "': add_bos is true but there is no BOS id; set bos_id or add_bos = false");
  write(dir, "tokenizer_config.json", "{}");
  write(dir, "config.json", R"({"eos_token_id": 5000})");
  CHECK(error_of([&] { load_tokenizer(dir.path); }) ==
        "model folder '" + dir.path.string() +
            "': the EOS id 5000 is outside the vocabulary [0, 260)");
  write(dir, "config.json", R"({"eos_token_id": [2, 3]})");
  const auto tokenizer = load_tokenizer(dir.path);
  CHECK(tokenizer->eos_id() == 2);
  const std::vector<std::int32_t> unknown{104, 9999};
  CHECK(error_of([&] { tokenizer->decode(unknown); }) ==
        source + ": no token has the id 9999 (ids are below 260, with gaps where no token is)");
  CHECK(error_of([&] { tokenizer->encode("x", {.add_bos = true}); }) ==
        "encode: add_bos is true but this tokenizer has no BOS token; encode with "
        "{.add_bos = false}");
}

TEST_CASE("a tokenizer.json cut short anywhere is a vkt::Error", "[models][tokenizer]") {
  TempDir dir;
  const std::string whole = vkt::test::tokenizer_json(kMerges, true);
  for (std::size_t length = 0; length < whole.size(); length += 7) {
    write(dir, "tokenizer.json", whole.substr(0, length));
    INFO(length);
    CHECK_THROWS_AS(load_tokenizer(dir.path), vkt::Error);
  }
  write(dir, "tokenizer.json", whole);
  CHECK(load_tokenizer(dir.path)->encode("hell") == std::vector<std::int32_t>{258});
}

TEST_CASE("a vocabulary without a byte's token refuses text with that byte",
          "[models][tokenizer]") {
  TempDir dir;
  write(dir, "vocab.json", R"({"a": 0, "b": 1, "ab": 2})");
  write(dir, "merges.txt", "a b\n");
  const auto tokenizer = load_tokenizer(dir.path);
  CHECK(tokenizer->encode("abab") == std::vector<std::int32_t>{2, 2});
  CHECK(error_of([&] { tokenizer->encode("abc"); }) ==
        "vocab.json '" + (dir / "vocab.json") + "' with merges.txt '" + (dir / "merges.txt") +
            "': the text holds the byte 0x63, whose token 'c' is not in the vocabulary; this "
            "tokenizer cannot encode it");
}
