#pragma once
// What the tokenizer tests share: the fortunes corpus, cut into fortunes.

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "../test_support.h"

namespace vkt::test {

/// Every fortune of Debian's fortunes package (/usr/share/games/fortunes, the
/// files without an extension, by name), else of samples/data/fortunes-wisdom.txt:
/// the texts between the "%" lines, each with its newlines. Read once.
inline const std::vector<std::string>& fortunes() {
  static const std::vector<std::string> corpus = [] {
    namespace fs = std::filesystem;
    std::vector<fs::path> files;
    const fs::path debian = "/usr/share/games/fortunes";
    std::error_code ec;
    if (fs::is_directory(debian, ec)) {
      for (const auto& entry : fs::directory_iterator(debian, ec)) {
        if (entry.is_regular_file() && !entry.is_symlink() && !entry.path().has_extension()) {
          files.push_back(entry.path());
        }
      }
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) files.push_back(samples_data_dir() / "fortunes-wisdom.txt");
    std::vector<std::string> out;
    for (const fs::path& file : files) {
      std::istringstream lines(read_file(file));
      std::string line, fortune;
      while (std::getline(lines, line)) {
        if (line == "%") {
          if (!fortune.empty()) out.push_back(std::move(fortune));
          fortune.clear();
        } else {
          fortune += line + "\n";
        }
      }
      if (!fortune.empty()) out.push_back(std::move(fortune));
    }
    REQUIRE(out.size() > 100);
    return out;
  }();
  return corpus;
}

/// The corpus's fortunes joined into one text.
inline std::string fortunes_text() {
  std::string all;
  for (const std::string& fortune : fortunes()) all += fortune;
  return all;
}

}  // namespace vkt::test
