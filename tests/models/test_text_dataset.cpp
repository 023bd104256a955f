// Fine-tuning text: plain files and JSON lines read, documents packed with
// the end of sequence between them, windows cut with every tenth held out.
#include <catch2/catch.hpp>

#include <fstream>

#include <vktower/models/bpe_tokenizer.h>
#include <vktower/models/text_dataset.h>

#include "../test_support.h"
#include "bpe_fixture.h"

namespace models = vkt::models;
using Catch::Matchers::Equals;

TEST_CASE(
    "fine-tuning text is a plain file or JSON lines with a text field, else one line saying "
    "which") {
  const vkt::test::TempDir dir;
  const auto write = [&](const char* name, const std::string& text) {
    vkt::test::write_file(dir.path / name, std::span<const char>(text.data(), text.size()));
    return (dir.path / name).string();
  };
  CHECK(models::read_documents(write("plain.txt", "one\n{not json}\n")) ==
        std::vector<std::string>{"one\n{not json}\n"});
  CHECK(models::read_documents(
            write("rows.jsonl", "{\"text\": \"a\"}\n\n{\"text\": \"b c\", \"id\": 2}\n")) ==
        std::vector<std::string>{"a", "b c"});
  const std::string no_text = write("no_text.jsonl", "{\"text\": \"a\"}\n{\"body\": \"b\"}\n");
  CHECK_THAT(vkt::test::error_of([&] { (void)models::read_documents(no_text); }),
             Equals(no_text + ":2: the object has no string field \"text\"; each line must be like "
                              "{\"text\": \"...\"}"));
  const std::string not_object = write("list.json", "[1, 2]\n");
  CHECK_THAT(vkt::test::error_of([&] { (void)models::read_documents(not_object); }),
             Equals(not_object + ":1: not a JSON object; each line of a JSON lines file must be an "
                                 "object with a \"text\" field"));
  const std::string empty = write("empty.txt", "");
  CHECK_THAT(vkt::test::error_of([&] { (void)models::read_documents(empty); }),
             Equals("--data '" + empty + "' holds no text"));
}

TEST_CASE(
    "documents pack with the end of sequence between them, into windows with every tenth held "
    "out") {
  const vkt::test::TempDir dir;
  const vkt::test::Merges merges{{"h", "e"}};
  std::ofstream(dir.path / "vocab.json") << vkt::test::vocab_json(vkt::test::bpe_vocab(merges));
  std::ofstream(dir.path / "merges.txt") << vkt::test::merges_txt(merges);
  const auto bpe =
      models::BpeTokenizer::from_vocab_and_merges(dir.path / "vocab.json", dir.path / "merges.txt");
  // Ids 0..255 are the bytes (a printable ASCII character's id is its code); 256 is "he".
  const std::int32_t he = 256, e = 'e';
  CHECK(models::pack_documents({"he", "e"}, *bpe, 7) == std::vector<std::int32_t>{he, 7, e, 7});
  CHECK(models::pack_documents({"he", "e"}, *bpe, std::nullopt) ==
        std::vector<std::int32_t>{he, e});

  std::vector<std::int32_t> stream(4 * 20 + 1);
  for (std::size_t i = 0; i < stream.size(); ++i) stream[i] = static_cast<std::int32_t>(i);
  const vkt::Dataset train = models::token_windows(stream, 4, false);
  const vkt::Dataset held_out = models::token_windows(stream, 4, true);
  CHECK(train.size() == 18);
  REQUIRE(held_out.size() == 2);  // windows 9 and 19
  const vkt::HostBatch rows = held_out.rows(0, 2);
  CHECK(rows.at("tokens").i32 == std::vector<std::int32_t>{36, 37, 38, 39, 76, 77, 78, 79});
  CHECK(rows.at("next").i32 == std::vector<std::int32_t>{37, 38, 39, 40, 77, 78, 79, 80});
}
