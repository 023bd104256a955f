// The byte-level BPE readers on any bytes: a vkt::Error or a tokenizer, nothing
// else; a tokenizer that loads encodes and decodes a fixed text and the input
// itself without crashing. (Round trips are not checked: a file may give an
// added token the id of a byte's token.)
// The first byte picks the form: even, the rest is tokenizer.json; odd, it is
// vocab.json, a NUL, then merges.txt.
#include <cstdio>
#include <cstring>

#include "../models/bpe_tokenizer.h"
#include "../runtime/vulkan/error.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const bool plain_files = (data[0] & 1) != 0;
  const std::uint8_t* rest = data + 1;
  const std::size_t rest_size = size - 1;
  std::string first, second;
  if (plain_files) {
    const auto* nul = static_cast<const std::uint8_t*>(std::memchr(rest, 0, rest_size));
    const std::size_t cut = nul ? static_cast<std::size_t>(nul - rest) : rest_size;
    first = vkt::fuzz::to_file("vocab.json", rest, cut);
    second = vkt::fuzz::to_file("merges.txt", rest + std::min(cut + 1, rest_size),
                                rest_size - std::min(cut + 1, rest_size));
  } else {
    first = vkt::fuzz::to_file("tokenizer.json", rest, rest_size);
  }
  try {
    const auto tokenizer = plain_files
                               ? vkt::models::BpeTokenizer::from_vocab_and_merges(first, second)
                               : vkt::models::BpeTokenizer::from_tokenizer_json(first);
    const std::string input(reinterpret_cast<const char*>(rest), rest_size);
    for (const std::string& text : {std::string("Hello  world, it's 42!\n"), input}) {
      try {
        (void)tokenizer->decode(tokenizer->encode(text, {.add_bos = false, .add_eos = false}));
      } catch (const vkt::Error&) {  // a byte the vocabulary lacks, a token not byte-level
      }
    }
  } catch (const vkt::Error&) {
  }
  std::remove(first.c_str());
  if (!second.empty()) std::remove(second.c_str());
  return 0;
}
