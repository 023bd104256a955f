#pragma once
// Tokenizers of Hugging Face model folders: text to token ids and back.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace vkt::models {

/// What Tokenizer::encode adds around the text's tokens. An unset field takes
/// the tokenizer's default (SpecialTokens::add_bos / add_eos).
struct EncodeOptions {
  std::optional<bool> add_bos =
      std::nullopt;  ///< put bos_id first (a tokenizer without one refuses true)
  std::optional<bool> add_eos =
      std::nullopt;  ///< put eos_id last (a tokenizer without one refuses true)
};

/// The beginning- and end-of-sequence tokens and whether encode adds them by
/// default. load_tokenizer() fills them from the model folder's config files.
struct SpecialTokens {
  std::optional<std::int32_t> bos_id;
  std::optional<std::int32_t> eos_id;
  bool add_bos = false;  ///< EncodeOptions::add_bos's default
  bool add_eos = false;  ///< EncodeOptions::add_eos's default
};

/// Text to token ids and back. Implementations: SentencePieceTokenizer
/// (tokenizer.model) and BpeTokenizer (GPT-2's byte-level BPE). Encoding and
/// decoding are const and safe to call from several threads at once.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  /// The ids of `text` (UTF-8; other bytes are kept as bytes where the model
  /// can), with BOS and EOS as `options` and special_tokens() say.
  std::vector<std::int32_t> encode(std::string_view text, const EncodeOptions& options = {}) const;

  /// The text of `ids`. Throws vkt::Error for an id outside [0, vocab_size()).
  virtual std::string decode(std::span<const std::int32_t> ids) const = 0;

  /// One more than the largest id.
  virtual std::int32_t vocab_size() const = 0;

  /// The vocabulary's string for `id` (the model's own spelling, e.g. "▁the"
  /// or "Ġthe"). Throws vkt::Error for an id that names no piece.
  virtual std::string id_to_piece(std::int32_t id) const = 0;

  /// The id of the vocabulary string `piece`, if there is one.
  virtual std::optional<std::int32_t> piece_to_id(std::string_view piece) const = 0;

  std::optional<std::int32_t> bos_id() const { return special_.bos_id; }
  std::optional<std::int32_t> eos_id() const { return special_.eos_id; }
  const SpecialTokens& special_tokens() const { return special_; }

  /// Replaces the BOS/EOS ids and defaults. Throws vkt::Error for an id
  /// outside the vocabulary, or a default of true without the id.
  void set_special_tokens(const SpecialTokens& special);

 protected:
  /// The ids of `text` alone, without BOS or EOS.
  virtual std::vector<std::int32_t> encode_text(std::string_view text) const = 0;

 private:
  SpecialTokens special_;
};

/// The tokenizer of a Hugging Face model folder: `tokenizer.model`
/// (SentencePiece) when there is one, else `tokenizer.json` (byte-level BPE),
/// else `vocab.json` + `merges.txt` (byte-level BPE). BOS and EOS come from
/// `tokenizer_config.json` (bos_token, eos_token, add_bos_token,
/// add_eos_token), else `special_tokens_map.json`, else `config.json`
/// (bos_token_id, eos_token_id), else the SentencePiece model itself.
///
/// encode adds BOS by default to a SentencePiece tokenizer that has one (what
/// Hugging Face's Llama tokenizer does) unless tokenizer_config.json says
/// `"add_bos_token": false`; a BPE tokenizer adds nothing unless the config
/// says so. EncodeOptions overrides either per call.
///
///   auto tokenizer = vkt::models::load_tokenizer("/models/tinyllama");
///   std::vector<std::int32_t> ids = tokenizer->encode("Hello world");  // BOS first
///   std::string text = tokenizer->decode(ids);                           // "Hello world"
///   auto bare = tokenizer->encode("Hello", {.add_bos = false});
///
/// Throws vkt::Error (one line naming the file) for a folder without any of
/// these files or a file that is malformed or of a kind not supported.
std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& model_dir);

}  // namespace vkt::models
