// SentencePiece models through the sentencepiece library.
#include "sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include "../runtime/vulkan/error.h"
#include "detail/json_file.h"

namespace vkt::models {

struct SentencePieceTokenizer::Processor {
  sentencepiece::SentencePieceProcessor sp;
};

SentencePieceTokenizer::SentencePieceTokenizer(const std::filesystem::path& model_file)
    : processor_(std::make_unique<Processor>()),
      source_("SentencePiece model '" + model_file.string() + "'") {
  // Read here rather than by sentencepiece, so that a missing file is said as vktower says it.
  const std::string bytes = detail::read_whole_file(model_file);
  if (const auto status = processor_->sp.LoadFromSerializedProto(bytes); !status.ok()) {
    throw Error(source_ + " could not be loaded (" + status.ToString() +
                "); is it a tokenizer.model file from the model's repository?");
  }
  SpecialTokens special;
  if (processor_->sp.bos_id() >= 0) special.bos_id = processor_->sp.bos_id();
  if (processor_->sp.eos_id() >= 0) special.eos_id = processor_->sp.eos_id();
  set_special_tokens(special);
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<std::int32_t> SentencePieceTokenizer::encode_text(std::string_view text) const {
  std::vector<int> ids;
  if (const auto status = processor_->sp.Encode(text, &ids); !status.ok()) {
    throw Error(source_ + " could not encode the text: " + status.ToString());
  }
  return {ids.begin(), ids.end()};
}

std::string SentencePieceTokenizer::decode(std::span<const std::int32_t> ids) const {
  std::vector<int> sp_ids;
  sp_ids.reserve(ids.size());
  for (const std::int32_t id : ids) {
    if (id < 0 || id >= vocab_size()) {
      throw Error(source_ + ": id " + std::to_string(id) + " is outside the vocabulary [0, " +
                  std::to_string(vocab_size()) + ")");
    }
    sp_ids.push_back(id);
  }
  std::string text;
  if (const auto status = processor_->sp.Decode(sp_ids, &text); !status.ok()) {
    throw Error(source_ + " could not decode the ids: " + status.ToString());
  }
  return text;
}

std::int32_t SentencePieceTokenizer::vocab_size() const {
  return processor_->sp.GetPieceSize();
}

std::string SentencePieceTokenizer::id_to_piece(std::int32_t id) const {
  if (id < 0 || id >= vocab_size()) {
    throw Error(source_ + ": id " + std::to_string(id) + " is outside the vocabulary [0, " +
                std::to_string(vocab_size()) + ")");
  }
  return processor_->sp.IdToPiece(id);
}

std::optional<std::int32_t> SentencePieceTokenizer::piece_to_id(std::string_view piece) const {
  // PieceToId gives unk_id for a piece it lacks; only the unknown piece itself maps there.
  const int id = processor_->sp.PieceToId(piece);
  if (id == processor_->sp.unk_id() && piece != processor_->sp.IdToPiece(id)) return std::nullopt;
  return id;
}

}  // namespace vkt::models
