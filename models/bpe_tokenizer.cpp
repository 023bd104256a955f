// Byte-level BPE: merging by rank, added tokens, decoding.
#include "bpe_tokenizer.h"

#include <algorithm>
#include <limits>

#include "../runtime/vulkan/error.h"
#include "byte_level.h"

namespace vkt::models {
namespace {

/// Words whose ids are remembered; past it the cache starts over (a bound on
/// memory for a long stream of distinct words).
constexpr std::size_t kWordCacheLimit = 1 << 16;

bool is_white_space(char c) {
  return c == ' ' || (c >= '\t' && c <= '\r');
}

}  // namespace

BpeTokenizer::BpeTokenizer(BpeModel model)
    : source_(std::move(model.source)), add_prefix_space_(model.add_prefix_space) {
  std::int32_t max_id = -1;
  for (auto& [piece, id] : model.vocab) {
    if (id < 0) {
      throw Error(source_ + ": token '" + piece + "' has the negative id " + std::to_string(id) +
                  "; ids start at 0");
    }
    if (auto [it, fresh] = pieces_.emplace(id, piece); !fresh) {
      throw Error(source_ + ": id " + std::to_string(id) + " is given to both '" + it->second +
                  "' and '" + piece + "'; each id names one token");
    }
    piece_ids_.emplace(std::move(piece), id);
    max_id = std::max(max_id, id);
  }
  for (std::size_t b = 0; b < 256; ++b) {
    const auto it = piece_ids_.find(byte_level_char(static_cast<std::uint8_t>(b)));
    byte_ids_[b] = it == piece_ids_.end() ? -1 : it->second;
  }
  const auto id_of = [&](const std::string& piece, std::size_t rank, const std::string& what) {
    const auto it = piece_ids_.find(piece);
    if (it == piece_ids_.end()) {
      throw Error(source_ + ": merge " + std::to_string(rank) + " ('" + model.merges[rank].first +
                  " " + model.merges[rank].second + "') " + what + " '" + piece +
                  "', which is not in the vocabulary; the merges and the vocabulary do not match");
    }
    return it->second;
  };
  if (model.merges.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
    throw Error(source_ + ": more merges than ranks fit in 32 bits");
  }
  for (std::size_t rank = 0; rank < model.merges.size(); ++rank) {
    const auto& [left, right] = model.merges[rank];
    const std::int32_t left_id = id_of(left, rank, "names");
    const std::int32_t right_id = id_of(right, rank, "names");
    const std::int32_t result = id_of(left + right, rank, "makes");
    // A repeated pair keeps its first (lowest) rank.
    merges_.try_emplace(pair_key(left_id, right_id),
                        Merge{static_cast<std::int32_t>(rank), result});
  }
  for (AddedToken& token : model.added_tokens) {
    if (token.content.empty()) {
      throw Error(source_ + ": added token " + std::to_string(token.id) +
                  " has empty content; an added token must match some text");
    }
    if (token.id < 0) {
      throw Error(source_ + ": added token '" + token.content + "' has the negative id " +
                  std::to_string(token.id) + "; ids start at 0");
    }
    max_id = std::max(max_id, token.id);
    added_by_id_[token.id] = added_tokens_.size();
    added_tokens_.push_back(std::move(token));
  }
  vocab_size_ = max_id + 1;
}

std::vector<std::int32_t> BpeTokenizer::encode_text(std::string_view text) const {
  std::vector<std::int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  // Where each added token next occurs at or after `from` (npos: nowhere).
  std::vector<std::size_t> next;
  for (const AddedToken& token : added_tokens_) next.push_back(text.find(token.content));
  std::size_t from = 0;
  for (std::size_t at = 0;;) {
    std::size_t best = std::string_view::npos, best_start = text.size();
    for (std::size_t t = 0; t < added_tokens_.size(); ++t) {
      if (next[t] != std::string_view::npos && next[t] < at) {
        next[t] = text.find(added_tokens_[t].content, at);
      }
      const std::size_t start = next[t];
      if (start == std::string_view::npos) continue;
      if (start < best_start ||
          (start == best_start && best != std::string_view::npos &&
           added_tokens_[t].content.size() > added_tokens_[best].content.size())) {
        best = t, best_start = start;
      }
    }
    if (best == std::string_view::npos) {
      encode_plain(text.substr(from), ids);
      return ids;
    }
    const AddedToken& token = added_tokens_[best];
    std::size_t plain_end = best_start, after = best_start + token.content.size();
    if (token.lstrip) {
      while (plain_end > from && is_white_space(text[plain_end - 1])) --plain_end;
    }
    if (token.rstrip) {
      while (after < text.size() && is_white_space(text[after])) ++after;
    }
    encode_plain(text.substr(from, plain_end - from), ids);
    ids.push_back(token.id);
    from = at = after;
  }
}

void BpeTokenizer::encode_plain(std::string_view text, std::vector<std::int32_t>& out) const {
  if (text.empty()) return;
  if (add_prefix_space_ && text.front() != ' ') {
    std::string spaced(1, ' ');  // not " " + std::string(text): GCC 12 warns (-Wrestrict) falsely
    spaced += text;
    for (const std::string_view word : gpt2_pre_tokenize(spaced)) encode_word(word, out);
    return;
  }
  for (const std::string_view word : gpt2_pre_tokenize(text)) encode_word(word, out);
}

void BpeTokenizer::encode_word(std::string_view word, std::vector<std::int32_t>& out) const {
  {
    const std::lock_guard lock(cache_mutex_);
    if (const auto it = word_cache_.find(std::string(word)); it != word_cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<std::int32_t> symbols;
  symbols.reserve(word.size());
  for (const char c : word) {
    const auto byte = static_cast<std::uint8_t>(c);
    if (byte_ids_[byte] < 0) {
      static constexpr char kHex[] = "0123456789abcdef";
      throw Error(source_ + ": the text holds the byte 0x" + kHex[byte >> 4] + kHex[byte & 15] +
                  ", whose token '" + byte_level_char(byte) +
                  "' is not in the vocabulary; this tokenizer cannot encode it");
    }
    symbols.push_back(byte_ids_[byte]);
  }
  // Merge the pair of lowest rank (leftmost among equals) until none has a rank.
  // Words are short, so a scan per merge beats a heap.
  for (;;) {
    std::size_t best_at = 0;
    const Merge* best = nullptr;
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
      const auto it = merges_.find(pair_key(symbols[i], symbols[i + 1]));
      if (it != merges_.end() && (best == nullptr || it->second.rank < best->rank)) {
        best = &it->second, best_at = i;
      }
    }
    if (best == nullptr) break;
    symbols[best_at] = best->result;
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best_at) + 1);
  }
  out.insert(out.end(), symbols.begin(), symbols.end());
  const std::lock_guard lock(cache_mutex_);
  if (word_cache_.size() >= kWordCacheLimit) word_cache_.clear();
  word_cache_.emplace(std::string(word), std::move(symbols));
}

std::string BpeTokenizer::decode(std::span<const std::int32_t> ids) const {
  std::string text;
  for (const std::int32_t id : ids) {
    if (const auto added = added_by_id_.find(id); added != added_by_id_.end()) {
      text += added_tokens_[added->second].content;
      continue;
    }
    const std::string piece = id_to_piece(id);  // throws for an id without a token
    const std::optional<std::string> bytes = byte_level_decode(piece);
    if (!bytes) {
      throw Error(source_ + ": token " + std::to_string(id) + " ('" + piece +
                  "') is not spelled in byte-level characters, so it stands for no bytes");
    }
    text += *bytes;
  }
  return text;
}

std::string BpeTokenizer::id_to_piece(std::int32_t id) const {
  if (const auto it = pieces_.find(id); it != pieces_.end()) return it->second;
  if (const auto added = added_by_id_.find(id); added != added_by_id_.end()) {
    return added_tokens_[added->second].content;
  }
  throw Error(source_ + ": no token has the id " + std::to_string(id) + " (ids are below " +
              std::to_string(vocab_size_) + ", with gaps where no token is)");
}

std::optional<std::int32_t> BpeTokenizer::piece_to_id(std::string_view piece) const {
  for (const AddedToken& token : added_tokens_) {
    if (token.content == piece) return token.id;
  }
  if (const auto it = piece_ids_.find(std::string(piece)); it != piece_ids_.end()) {
    return it->second;
  }
  return std::nullopt;
}

}  // namespace vkt::models
