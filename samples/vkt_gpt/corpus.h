#pragma once
// vkt-gpt's text: every fortune file of a directory (or one text file) read as
// bytes, each distinct byte a token, cut into windows of context + 1.

#include <fmt/format.h>

#include <vktower/runtime/io/dataset.h>
#include <vktower/runtime/vulkan/error.h>
#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

/// The characters of the corpus and their token ids.
struct Corpus {
  std::string text;
  std::vector<unsigned char> vocab;     ///< token id -> byte, in byte order
  std::array<std::int32_t, 256> ids{};  ///< byte -> token id (-1: not in the corpus)
  std::int64_t files = 0;

  std::int64_t vocab_size() const { return static_cast<std::int64_t>(vocab.size()); }
  std::int32_t id(char c) const { return ids[static_cast<unsigned char>(c)]; }
};

/// `path`: a text file, or a directory whose plain files are read in name
/// order (fortune's index files, *.dat, and the *.u8 links to the same texts
/// are skipped). A vkt::Error names --data and what to do.
inline Corpus read_corpus(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    throw vkt::Error(fmt::format(
        "--data '{}' does not exist; install the fortunes package (apt-get install fortunes) "
        "or give a text file",
        path));
  }
  std::vector<fs::path> files;
  if (fs::is_directory(status)) {
    for (const fs::directory_entry& e : fs::directory_iterator(path, ec)) {
      const std::string ext = e.path().extension().string();
      if (e.is_regular_file() && !e.is_symlink() && ext != ".dat" && ext != ".u8") {
        files.push_back(e.path());
      }
    }
    if (ec) throw vkt::Error(fmt::format("--data '{}' cannot be read: {}", path, ec.message()));
    std::sort(files.begin(), files.end());
  } else {
    files.push_back(path);
  }
  Corpus corpus;
  for (const fs::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw vkt::Error(fmt::format("--data: cannot read '{}'", file.string()));
    corpus.text.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    ++corpus.files;
  }
  corpus.ids.fill(-1);
  for (const char c : corpus.text) corpus.ids[static_cast<unsigned char>(c)] = 0;
  for (int b = 0; b < 256; ++b) {
    if (corpus.ids[b] == 0) {
      corpus.ids[b] = static_cast<std::int32_t>(corpus.vocab.size());
      corpus.vocab.push_back(static_cast<unsigned char>(b));
    }
  }
  return corpus;
}

/// Windows of `context` + 1 characters, one every `context`: "tokens" [N, T]
/// and "next" [N, T], the token after each. Every tenth window is held out
/// for validation (`validation`), the rest train.
inline vkt::Dataset windows(const Corpus& corpus, std::int64_t context, bool validation) {
  std::vector<std::int32_t> tokens, next;
  std::int64_t rows = 0;
  const auto size = static_cast<std::int64_t>(corpus.text.size());
  for (std::int64_t w = 0, start = 0; start + context + 1 <= size; ++w, start += context) {
    if ((w % 10 == 9) != validation) continue;
    for (std::int64_t t = 0; t < context; ++t) {
      tokens.push_back(corpus.id(corpus.text[static_cast<std::size_t>(start + t)]));
      next.push_back(corpus.id(corpus.text[static_cast<std::size_t>(start + t + 1)]));
    }
    ++rows;
  }
  if (rows == 0) return vkt::Dataset();
  return vkt::Dataset({{"tokens", vkt::HostTensor::ints({rows, context}, tokens)},
                       {"next", vkt::HostTensor::ints({rows, context}, next)}});
}
