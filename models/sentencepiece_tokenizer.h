#pragma once
// SentencePiece models (tokenizer.model: Llama, Mistral, T5, ...) through the
// sentencepiece library.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer.h"

namespace vkt::models {

/// A SentencePiece model, encoded and decoded exactly as the sentencepiece
/// library does (ids equal SentencePieceProcessor::EncodeAsIds's). Its own
/// bos/eos ids, where the model has them, are the SpecialTokens'; encode adds
/// neither by default (load_tokenizer sets Hugging Face's defaults).
///
///   vkt::models::SentencePieceTokenizer sp("llama/tokenizer.model");
///   auto ids = sp.encode("Hello", {.add_bos = true});  // {1, 15043}
class SentencePieceTokenizer : public Tokenizer {
 public:
  /// Throws vkt::Error naming `model_file` when it cannot be read or is not a
  /// SentencePiece model.
  explicit SentencePieceTokenizer(const std::filesystem::path& model_file);
  ~SentencePieceTokenizer() override;

  /// Control ids (<s>, </s>) decode to nothing, unknown ids to " ⁇ ", as in sentencepiece.
  std::string decode(std::span<const std::int32_t> ids) const override;
  std::int32_t vocab_size() const override;
  std::string id_to_piece(std::int32_t id) const override;
  std::optional<std::int32_t> piece_to_id(std::string_view piece) const override;

 protected:
  std::vector<std::int32_t> encode_text(std::string_view text) const override;

 private:
  struct Processor;  // sentencepiece::SentencePieceProcessor, kept out of this header
  std::unique_ptr<Processor> processor_;
  std::string source_;
};

}  // namespace vkt::models
