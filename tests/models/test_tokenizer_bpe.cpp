// BpeTokenizer: GPT-2's pre-tokenizer on hand-checked cuts, merge order on a
// hand-checked tiny merges list, the ids of a naive merge-by-rank reference on
// the whole fortunes corpus (merges learned here), round trips, added tokens.
#include <vktower/models/bpe_tokenizer.h>
#include <vktower/models/byte_level.h>
#include <vktower/models/tokenizer.h>

#include "bpe_fixture.h"

using vkt::models::BpeTokenizer;
using vkt::models::gpt2_pre_tokenize;
using vkt::test::fortunes;
using vkt::test::Merges;
using vkt::test::TempDir;

namespace {

std::vector<std::string> cut(std::string_view text) {
  const auto pieces = gpt2_pre_tokenize(text);
  return {pieces.begin(), pieces.end()};
}

/// Merges learned once per process from the first fortunes (about 120 KB).
const Merges& learned_merges() {
  static const Merges merges = [] {
    std::string text;
    for (const std::string& fortune : fortunes()) {
      if (text.size() > 120'000) break;
      text += fortune;
    }
    return vkt::test::learn_merges(text, 300);
  }();
  return merges;
}

/// A model folder holding `files` (name -> contents).
void write_folder(const TempDir& dir,
                  const std::vector<std::pair<std::string, std::string>>& files) {
  for (const auto& [name, contents] : files) vkt::test::write_file(dir.path / name, contents);
}

}  // namespace

TEST_CASE("byte-level characters are GPT-2's and decode back to their bytes",
          "[models][tokenizer]") {
  CHECK(vkt::models::byte_level_char(' ') == "Ġ");
  CHECK(vkt::models::byte_level_char('\n') == "Ċ");
  CHECK(vkt::models::byte_level_char('A') == "A");
  CHECK(vkt::models::byte_level_char(0) == "Ā");
  CHECK(vkt::models::byte_level_char(0xAD) == "Ń");  // the soft hyphen is not printable
  CHECK(vkt::models::byte_level_char(0xE9) == "é");
  std::string every_byte;
  for (int b = 0; b < 256; ++b) every_byte += static_cast<char>(b);
  CHECK(vkt::models::byte_level_decode(vkt::models::byte_level_encode(every_byte)) == every_byte);
  CHECK(vkt::models::byte_level_decode("Ġ☕") == std::nullopt);
}

TEST_CASE("gpt2_pre_tokenize cuts as GPT-2's pattern does", "[models][tokenizer]") {
  using V = std::vector<std::string>;
  CHECK(cut("Hello world") == V{"Hello", " world"});
  CHECK(cut("I've  3 cats!") == V{"I", "'ve", " ", " 3", " cats", "!"});
  // Contractions only in lower case and only those seven; other quotes are punctuation.
  CHECK(cut("it's they're we'll I'd I'M 'x") ==
        V{"it", "'s", " they", "'re", " we", "'ll", " I", "'d", " I", "'", "M", " '", "x"});
  CHECK(cut("don't?!'s") == V{"don", "'t", "?!'", "s"});
  // White space: a run before a word leaves its last space to the word; at the
  // end, or before more white space, it stays whole; a newline is no word's space.
  CHECK(cut("a   b") == V{"a", "  ", " b"});
  CHECK(cut("a \n b") == V{"a", " \n", " b"});
  CHECK(cut("a\nb") == V{"a", "\n", "b"});
  CHECK(cut("a  \tb") == V{"a", "  ", "\t", "b"});
  CHECK(cut("end   ") == V{"end", "   "});
  CHECK(cut(" ") == V{" "});
  CHECK(cut("") == V{});
  // Letters and numbers are Unicode's: accents, CJK, Arabic-Indic digits, ½ (No).
  CHECK(cut("naïve café 日本語 ٣٤ ½x") == V{"naïve", " café", " 日本語", " ٣٤", " ½", "x"});
  CHECK(cut("abc123 4.5%") == V{"abc", "123", " 4", ".", "5", "%"});
  // A no-break space (U+00A0) is white space but not the optional space.
  CHECK(cut("a\u00a0b") == V{"a", "\u00a0", "b"});
  // Bytes that are not UTF-8 are punctuation, one character each.
  CHECK(cut("a\xff\xfe b \xc3") == V{"a", "\xff\xfe", " b", " \xc3"});
}

TEST_CASE("BpeTokenizer merges the pair of lowest rank first", "[models][tokenizer]") {
  // Ranks: "l o" first, then "h e", then "l l". Merging in file order from the
  // left, or all pairs greedily, would give "he" "ll" "o" instead.
  const Merges merges{{"l", "o"}, {"h", "e"}, {"l", "l"}, {"Ġ", "w"}, {"he", "l"}, {"Ġw", "lo"}};
  const auto vocab = vkt::test::bpe_vocab(merges);  // 256 bytes, then lo he ll Ġw hel Ġwlo
  REQUIRE(vocab.size() == 262);
  TempDir dir;
  write_folder(dir, {{"vocab.json", vkt::test::vocab_json(vocab)},
                     {"merges.txt", vkt::test::merges_txt(merges)}});
  const auto tokenizer = vkt::models::load_tokenizer(dir.path);
  // hello: h e l l o -> h e l lo -> he l lo -> hel lo ("he l" outranks nothing left).
  CHECK(tokenizer->encode("hello") == std::vector<std::int32_t>{260, 256});
  // " wlo": Ġ w l o -> Ġ w lo -> Ġw lo -> Ġwlo.
  CHECK(tokenizer->encode(" wlo") == std::vector<std::int32_t>{261});
  // "llo": l l o -> l lo ("l o" first, although "l l" is leftmost).
  CHECK(tokenizer->encode("llo") == std::vector<std::int32_t>{'l', 256});
  CHECK(tokenizer->id_to_piece(261) == "Ġwlo");
  CHECK(tokenizer->piece_to_id("Ġwlo") == 261);
  CHECK(tokenizer->vocab_size() == 262);
  CHECK_FALSE(tokenizer->bos_id().has_value());
  CHECK(tokenizer->encode("hello", {}).size() == 2);  // no BOS by default
}

TEST_CASE("BpeTokenizer gives a naive merge-by-rank reference's ids on every fortune",
          "[models][tokenizer]") {
  const Merges& merges = learned_merges();
  REQUIRE(merges.size() == 300);
  TempDir plain, json_strings, json_pairs;
  write_folder(plain, {{"vocab.json", vkt::test::vocab_json(vkt::test::bpe_vocab(merges))},
                       {"merges.txt", vkt::test::merges_txt(merges)}});
  write_folder(json_strings, {{"tokenizer.json", vkt::test::tokenizer_json(merges, false)}});
  write_folder(json_pairs, {{"tokenizer.json", vkt::test::tokenizer_json(merges, true)}});
  const auto from_plain = vkt::models::load_tokenizer(plain.path);
  const auto from_strings = vkt::models::load_tokenizer(json_strings.path);
  const auto from_pairs = vkt::models::load_tokenizer(json_pairs.path);
  const vkt::test::NaiveBpe naive(merges);
  std::size_t tokens = 0, bytes = 0;
  for (const std::string& fortune : fortunes()) {
    INFO(fortune);
    const auto ids = from_plain->encode(fortune);
    REQUIRE(ids == naive.encode(fortune));
    REQUIRE(from_strings->encode(fortune) == ids);
    REQUIRE(from_pairs->encode(fortune) == ids);
    tokens += ids.size(), bytes += fortune.size();
  }
  // The merges do compress: a third fewer tokens than bytes at least.
  CHECK(tokens * 3 < bytes * 2);
}

TEST_CASE("BpeTokenizer decodes every fortune, white space runs and any bytes back",
          "[models][tokenizer]") {
  TempDir dir;
  write_folder(dir, {{"tokenizer.json", vkt::test::tokenizer_json(learned_merges(), false)}});
  const auto tokenizer = vkt::models::load_tokenizer(dir.path);
  for (const std::string& fortune : fortunes()) {
    INFO(fortune);
    REQUIRE(tokenizer->decode(tokenizer->encode(fortune)) == fortune);
  }
  REQUIRE(tokenizer->decode(tokenizer->encode(vkt::test::fortunes_text())) ==
          vkt::test::fortunes_text());
  std::string every_byte;
  for (int b = 255; b >= 0; --b) every_byte += static_cast<char>(b);
  for (const std::string& text :
       {std::string(), std::string("   \n\n\t  x  \r\n "), std::string("naïve café ☕ 日本語 ٣٤ ½"),
        std::string("\xf0\x9f\x98\x80 emoji and a cut one \xf0\x9f"), every_byte}) {
    REQUIRE(tokenizer->decode(tokenizer->encode(text)) == text);
  }
}

TEST_CASE("BpeTokenizer matches added tokens before cutting words", "[models][tokenizer]") {
  const Merges& merges = learned_merges();
  const auto vocab = vkt::test::bpe_vocab(merges);
  const auto eot = static_cast<std::int32_t>(vocab.size());
  const std::string added = R"([{"id": )" + std::to_string(eot) +
                            R"(, "content": "<|endoftext|>", "single_word": false, "lstrip": false,
      "rstrip": false, "normalized": false, "special": true},
    {"id": )" + std::to_string(eot + 1) +
                            R"(, "content": "<mask>", "lstrip": true, "rstrip": true}])";
  TempDir dir;
  write_folder(dir, {{"tokenizer.json", vkt::test::tokenizer_json(merges, false, added)},
                     {"tokenizer_config.json",
                      R"({"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"})"}});
  const auto tokenizer = vkt::models::load_tokenizer(dir.path);
  CHECK(tokenizer->vocab_size() == eot + 2);
  CHECK(tokenizer->bos_id() == eot);
  CHECK(tokenizer->eos_id() == eot);
  const std::string text = "The end.<|endoftext|>A new one<|endoftext|><|endoftext|>";
  CHECK(tokenizer->encode(text) == vkt::test::NaiveBpe(merges).encode(text, "<|endoftext|>", eot));
  CHECK(tokenizer->decode(tokenizer->encode(text)) == text);
  // lstrip and rstrip: the white space around "<mask>" is the token's.
  const auto masked = tokenizer->encode("a  <mask> b");
  CHECK(masked == std::vector<std::int32_t>{'a', eot + 1, 'b'});
  CHECK(tokenizer->decode(masked) == "a<mask>b");
  const auto with_eos = tokenizer->encode("x", {.add_bos = true, .add_eos = true});
  CHECK(with_eos == std::vector<std::int32_t>{eot, 'x', eot});

  // In the vocab.json form the config's special tokens are the added tokens.
  TempDir plain;
  write_folder(plain,
               {{"vocab.json", vkt::test::vocab_json(vocab, {{"<|endoftext|>", eot}})},
                {"merges.txt", vkt::test::merges_txt(merges)},
                {"special_tokens_map.json", R"({"eos_token": {"content": "<|endoftext|>"}})"}});
  const auto gpt2_style = vkt::models::load_tokenizer(plain.path);
  CHECK(gpt2_style->eos_id() == eot);
  CHECK(gpt2_style->encode(text) == tokenizer->encode(text));
}

TEST_CASE("BpeTokenizer's add_prefix_space puts a space before each run of text",
          "[models][tokenizer]") {
  const Merges merges{{"Ġ", "h"}, {"Ġh", "i"}};
  const std::string plain = vkt::test::tokenizer_json(merges, false);
  std::string spaced = plain;
  const std::string flag = R"("add_prefix_space": false)";
  spaced.replace(spaced.find(flag), flag.size(), R"("add_prefix_space": true)");
  TempDir without, with;
  write_folder(without, {{"tokenizer.json", plain}});
  write_folder(with, {{"tokenizer.json", spaced}});
  const auto tokenizer = vkt::models::load_tokenizer(with.path);
  CHECK(vkt::models::load_tokenizer(without.path)->encode("hi") ==
        std::vector<std::int32_t>{'h', 'i'});
  CHECK(tokenizer->encode("hi") == std::vector<std::int32_t>{257});   // " hi"
  CHECK(tokenizer->encode(" hi") == std::vector<std::int32_t>{257});  // already has one
  CHECK(tokenizer->decode(tokenizer->encode("hi")) == " hi");         // as Hugging Face decodes it
}
