#pragma once
// GPT-2's byte-level BPE: text cut into words (gpt2_pre_tokenize), each word's
// bytes spelled as byte-level characters, then pairs merged by rank.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenizer.h"

namespace vkt::models {

/// A token matched in the raw text before pre-tokenization (tokenizer.json's
/// added_tokens, e.g. "<|endoftext|>"): it is never cut or merged.
struct AddedToken {
  std::int32_t id = 0;
  std::string content;  ///< the text it matches (and decodes to), not byte-level spelled
  bool lstrip = false;  ///< also takes the white space just before it
  bool rstrip = false;  ///< also takes the white space just after it
};

/// What a byte-level BPE tokenizer is made of, as its files give it.
struct BpeModel {
  /// Byte-level spelled token (e.g. "Ġthe") and its id.
  std::vector<std::pair<std::string, std::int32_t>> vocab;
  /// Pairs of tokens, by rank: the first is merged before every other.
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<AddedToken> added_tokens;
  /// Put a space before each run of text that does not start with one (the
  /// ByteLevel pre-tokenizer's add_prefix_space, false for GPT-2).
  bool add_prefix_space = false;
  /// What error messages name the model by (its files).
  std::string source;
};

/// Byte-level BPE (GPT-2, GPT-J, Pythia, Qwen's ...). encode: added tokens are
/// matched first (leftmost, then longest); the text between them is cut by
/// gpt2_pre_tokenize, and in each word the adjacent pair of lowest merge rank is
/// merged (leftmost first) until no pair has a rank. decode(encode(text)) ==
/// text for every byte string.
///
///   auto bpe = vkt::models::BpeTokenizer::from_vocab_and_merges("gpt2/vocab.json",
///                                                              "gpt2/merges.txt");
///   bpe->encode("Hello world");  // {15496, 995}
class BpeTokenizer : public Tokenizer {
 public:
  /// Throws vkt::Error (naming model.source) for a merge that names a token
  /// the vocabulary lacks or makes one it lacks, a negative or repeated id, or
  /// an empty added token.
  explicit BpeTokenizer(BpeModel model);

  /// A Hugging Face tokenizer.json whose model.type is "BPE" and whose
  /// pre_tokenizer is ByteLevel. Throws vkt::Error naming the file and the
  /// field for anything else.
  static std::unique_ptr<BpeTokenizer> from_tokenizer_json(const std::filesystem::path& path);

  /// GPT-2's original files: vocab.json (token -> id) and merges.txt (one
  /// "left right" pair a line, by rank; a first line "#version: ..." is
  /// skipped). `special_tokens` (e.g. "<|endoftext|>", which must be in the
  /// vocabulary) are matched as added tokens.
  static std::unique_ptr<BpeTokenizer> from_vocab_and_merges(
      const std::filesystem::path& vocab_json, const std::filesystem::path& merges_txt,
      std::span<const std::string> special_tokens = {});

  std::string decode(std::span<const std::int32_t> ids) const override;
  std::int32_t vocab_size() const override { return vocab_size_; }
  std::string id_to_piece(std::int32_t id) const override;
  std::optional<std::int32_t> piece_to_id(std::string_view piece) const override;

 protected:
  std::vector<std::int32_t> encode_text(std::string_view text) const override;

 private:
  struct Merge {
    std::int32_t rank;
    std::int32_t result;
  };
  static std::uint64_t pair_key(std::int32_t left, std::int32_t right) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) |
           static_cast<std::uint32_t>(right);
  }
  void encode_plain(std::string_view text, std::vector<std::int32_t>& out) const;
  void encode_word(std::string_view word, std::vector<std::int32_t>& out) const;

  std::string source_;
  bool add_prefix_space_ = false;
  std::unordered_map<std::string, std::int32_t> piece_ids_;
  std::unordered_map<std::int32_t, std::string> pieces_;
  std::unordered_map<std::uint64_t, Merge> merges_;
  std::vector<AddedToken> added_tokens_;
  std::unordered_map<std::int32_t, std::size_t> added_by_id_;
  std::int32_t byte_ids_[256];
  std::int32_t vocab_size_ = 0;

  /// Each word's ids, as merging found them (cleared when it grows past a limit).
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<std::int32_t>> word_cache_;
};

}  // namespace vkt::models
