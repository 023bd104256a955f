#pragma once
// A byte-level BPE made in the test: merges learned from part of the fortunes
// corpus by a tiny trainer, written as vocab.json + merges.txt and as
// tokenizer.json, and a deliberately naive encoder to compare BpeTokenizer with.

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <vktower/models/byte_level.h>

#include "tokenizer_support.h"

namespace vkt::test {

using Merges = std::vector<std::pair<std::string, std::string>>;

/// The vocabulary such a BPE has: the 256 byte characters (ids 0..255, in
/// byte order), then each merge's product in rank order (once: two merges can
/// make the same token).
inline std::vector<std::string> bpe_vocab(const Merges& merges) {
  std::vector<std::string> vocab;
  std::set<std::string> seen;
  for (int b = 0; b < 256; ++b)
    vocab.push_back(models::byte_level_char(static_cast<std::uint8_t>(b)));
  for (const auto& [left, right] : merges) {
    if (seen.insert(left + right).second) vocab.push_back(left + right);
  }
  return vocab;
}

/// `count` merges learned from `text`: the most frequent adjacent pair within
/// the pre-tokenizer's words (ties to the pair seen first), merged everywhere, repeated.
inline Merges learn_merges(const std::string& text, std::size_t count) {
  std::vector<std::string> tokens = bpe_vocab({});  // id -> token, growing
  std::unordered_map<std::string, std::size_t> word_counts;
  for (const std::string_view word : models::gpt2_pre_tokenize(text))
    ++word_counts[std::string(word)];
  std::vector<std::pair<std::vector<std::int32_t>, std::size_t>> words;
  for (const auto& [word, n] : word_counts) {
    words.emplace_back(std::vector<std::int32_t>(word.begin(), word.end()), n);
    for (std::int32_t& b : words.back().first) b &= 0xFF;  // byte ids are the bytes
  }
  std::sort(words.begin(), words.end());  // a fixed order, so that ties are broken the same way
  const auto key = [](std::int32_t a, std::int32_t b) { return (std::int64_t{a} << 32) | b; };
  Merges merges;
  while (merges.size() < count) {
    std::unordered_map<std::int64_t, std::size_t> pairs;
    std::int64_t best = -1;
    for (const auto& [symbols, n] : words) {
      for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
        const std::int64_t pair = key(symbols[i], symbols[i + 1]);
        const std::size_t total = pairs[pair] += n;
        if (best < 0 || total > pairs[best]) best = pair;
      }
    }
    if (best < 0) break;
    const auto left = static_cast<std::int32_t>(best >> 32);
    const auto right = static_cast<std::int32_t>(best & 0xFFFFFFFF);
    merges.emplace_back(tokens[left], tokens[right]);
    const auto merged_id = static_cast<std::int32_t>(tokens.size());
    tokens.push_back(tokens[left] + tokens[right]);
    for (auto& [symbols, n] : words) {
      std::vector<std::int32_t> merged;
      for (std::size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
          merged.push_back(merged_id);
          ++i;
        } else {
          merged.push_back(symbols[i]);
        }
      }
      symbols = std::move(merged);
    }
  }
  return merges;
}

/// The naive encoder: in each word, find the pair of lowest rank anywhere, merge
/// every occurrence of it left to right, and start over, on strings throughout;
/// `special` (if not empty) is cut out of the text first and gets `special_id`.
class NaiveBpe {
 public:
  explicit NaiveBpe(const Merges& merges) : merges_(merges) {
    for (std::size_t r = 0; r < merges.size(); ++r) {
      ranks_.emplace(merges[r].first + " " + merges[r].second, r);
    }
    const std::vector<std::string> vocab = bpe_vocab(merges);
    for (std::size_t id = 0; id < vocab.size(); ++id)
      ids_.emplace(vocab[id], static_cast<std::int32_t>(id));
  }

  std::vector<std::int32_t> encode(const std::string& text, const std::string& special = {},
                                   std::int32_t special_id = -1) const {
    std::vector<std::int32_t> out;
    std::size_t from = 0;
    for (std::size_t at;
         !special.empty() && (at = text.find(special, from)) != std::string::npos;) {
      encode_plain(text.substr(from, at - from), out);
      out.push_back(special_id);
      from = at + special.size();
    }
    encode_plain(text.substr(from), out);
    return out;
  }

 private:
  void encode_plain(const std::string& plain, std::vector<std::int32_t>& out) const {
    for (const std::string_view word : models::gpt2_pre_tokenize(plain)) {
      std::vector<std::string> symbols;
      for (const char c : word)
        symbols.push_back(models::byte_level_char(static_cast<std::uint8_t>(c)));
      for (;;) {
        std::size_t best_rank = merges_.size();
        for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
          const auto it = ranks_.find(symbols[i] + " " + symbols[i + 1]);
          if (it != ranks_.end() && it->second < best_rank) best_rank = it->second;
        }
        if (best_rank == merges_.size()) break;
        const auto& [left, right] = merges_[best_rank];
        std::vector<std::string> merged;
        for (std::size_t i = 0; i < symbols.size(); ++i) {
          if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
            merged.push_back(left + right);
            ++i;
          } else {
            merged.push_back(symbols[i]);
          }
        }
        symbols = std::move(merged);
      }
      for (const std::string& symbol : symbols) out.push_back(ids_.at(symbol));
    }
  }

  Merges merges_;
  std::unordered_map<std::string, std::size_t> ranks_;  // "left right" -> rank
  std::unordered_map<std::string, std::int32_t> ids_;
};

/// `text` as a JSON string literal.
inline std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\', out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\u00", out += kHex[(c >> 4) & 15], out += kHex[c & 15];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

/// vocab.json's text for `vocab` (ids are the positions) plus `extra` (token, id) pairs.
inline std::string vocab_json(const std::vector<std::string>& vocab,
                              const std::vector<std::pair<std::string, std::int32_t>>& extra = {}) {
  std::string out = "{";
  for (std::size_t id = 0; id < vocab.size(); ++id) {
    out += (id ? ", " : "") + json_string(vocab[id]) + ": " + std::to_string(id);
  }
  for (const auto& [token, id] : extra)
    out += ", " + json_string(token) + ": " + std::to_string(id);
  return out + "}";
}

inline std::string merges_txt(const Merges& merges) {
  std::string out = "#version: 0.2\n";
  for (const auto& [left, right] : merges) out += left + " " + right + "\n";
  return out;
}

/// A tokenizer.json for `merges` (as ["left", "right"] pairs when `pairs`, else
/// "left right" strings) with `added_tokens` (a JSON array) and a ByteLevel pre-tokenizer.
inline std::string tokenizer_json(const Merges& merges, bool pairs,
                                  const std::string& added_tokens = "[]") {
  std::string merge_list;
  for (const auto& [left, right] : merges) {
    merge_list += (merge_list.empty() ? "" : ", ") +
                  (pairs ? "[" + json_string(left) + ", " + json_string(right) + "]"
                         : json_string(left + " " + right));
  }
  return R"({"version": "1.0", "added_tokens": )" + added_tokens +
         R"(, "normalizer": null,
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
  "post_processor": null, "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": "",
            "end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false,
            "vocab": )" +
         vocab_json(bpe_vocab(merges)) + R"(, "merges": [)" + merge_list + "]}}";
}

}  // namespace vkt::test
