// Reading byte-level BPE files: tokenizer.json, or vocab.json + merges.txt.
#include <algorithm>
#include <limits>
#include <sstream>

#include "../runtime/vulkan/error.h"
#include "bpe_tokenizer.h"
#include "detail/json_file.h"

namespace vkt::models {
namespace {

using nlohmann::json;

std::string quoted(const std::filesystem::path& path) {
  // Appended rather than "'" + path.string(): GCC 12 warns (-Wrestrict) on that falsely.
  std::string out = "'";
  out += path.string();
  out += '\'';
  return out;
}

/// The JSON type's name, for messages.
std::string type_of(const json& value) {
  return value.is_null() ? "null" : value.type_name();
}

/// vocab.json or tokenizer.json's model.vocab: an object of token -> id.
std::vector<std::pair<std::string, std::int32_t>> read_vocab(const json& vocab,
                                                             const std::string& where) {
  if (!vocab.is_object()) {
    throw Error(where + " is " + type_of(vocab) + ", not an object of token -> id");
  }
  std::vector<std::pair<std::string, std::int32_t>> out;
  out.reserve(vocab.size());
  for (const auto& [piece, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<std::int64_t>() < 0 ||
        id.get<std::int64_t>() > std::numeric_limits<std::int32_t>::max()) {
      throw Error(where + ": the id of '" + piece + "' is " + id.dump() +
                  ", not an integer in [0, 2^31)");
    }
    out.emplace_back(piece, static_cast<std::int32_t>(id.get<std::int64_t>()));
  }
  return out;
}

/// One merge "left right" (a line of merges.txt, or a string in tokenizer.json).
std::pair<std::string, std::string> split_merge(std::string_view text, const std::string& where) {
  const std::size_t space = text.find(' ');
  if (space == std::string_view::npos || space == 0 || space + 1 == text.size() ||
      text.find(' ', space + 1) != std::string_view::npos) {
    throw Error(where + " is '" + std::string(text) + "', not two tokens separated by one space");
  }
  return {std::string(text.substr(0, space)), std::string(text.substr(space + 1))};
}

/// A boolean field of `object`, `fallback` when absent or null.
bool bool_field(const json& object, const char* name, bool fallback, const std::string& where) {
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) {
    throw Error(where + "." + name + " is " + it->dump() + ", not true or false");
  }
  return it->get<bool>();
}

/// tokenizer.json's model (type "BPE" without the options vktower lacks).
void read_bpe_model(const json& model, const std::string& file, BpeModel& out) {
  if (!model.is_object()) throw Error(file + ": model is " + type_of(model) + ", not an object");
  const auto type = model.find("type");
  if (type == model.end() || !type->is_string() || *type != "BPE") {
    throw Error(file + ": model.type is " + (type == model.end() ? "missing" : type->dump()) +
                "; vktower reads byte-level BPE tokenizers only (model.type \"BPE\"); use the "
                "model's tokenizer.model (SentencePiece) if it has one");
  }
  for (const char* name : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const auto it = model.find(name);
    if (it != model.end() && !it->is_null() && *it != "") {
      throw Error(file + ": model." + name + " is " + it->dump() +
                  "; vktower's BPE supports only byte-level models, which have none");
    }
  }
  if (bool_field(model, "byte_fallback", false, file + ": model")) {
    throw Error(file +
                ": model.byte_fallback is true; vktower's BPE supports only byte-level "
                "models (byte_fallback false)");
  }
  if (bool_field(model, "ignore_merges", false, file + ": model")) {
    throw Error(file + ": model.ignore_merges is true; vktower's BPE always merges");
  }
  const auto vocab = model.find("vocab");
  if (vocab == model.end()) throw Error(file + ": model.vocab is missing");
  out.vocab = read_vocab(*vocab, file + ": model.vocab");
  const auto merges = model.find("merges");
  if (merges == model.end() || !merges->is_array()) {
    throw Error(file + ": model.merges is " +
                (merges == model.end() ? std::string("missing") : type_of(*merges)) +
                ", not an array of merges");
  }
  out.merges.reserve(merges->size());
  for (std::size_t i = 0; i < merges->size(); ++i) {
    const json& merge = (*merges)[i];
    const std::string where = file + ": model.merges[" + std::to_string(i) + "]";
    if (merge.is_string()) {
      out.merges.push_back(split_merge(merge.get<std::string>(), where));
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      out.merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    } else {
      throw Error(where + " is " + merge.dump() +
                  ", neither \"left right\" nor [\"left\", \"right\"]");
    }
  }
}

/// tokenizer.json's pre_tokenizer: ByteLevel with its regex.
void read_pre_tokenizer(const json& root, const std::string& file, BpeModel& out) {
  const auto pre = root.find("pre_tokenizer");
  const json* type = nullptr;
  if (pre != root.end() && pre->is_object() && pre->contains("type")) type = &(*pre)["type"];
  if (type == nullptr || *type != "ByteLevel") {
    throw Error(file + ": pre_tokenizer.type is " + (type ? type->dump() : std::string("missing")) +
                "; vktower's BPE supports only the ByteLevel pre-tokenizer (GPT-2's)");
  }
  if (!bool_field(*pre, "use_regex", true, file + ": pre_tokenizer")) {
    throw Error(file +
                ": pre_tokenizer.use_regex is false; vktower's BPE always cuts words "
                "with GPT-2's pattern");
  }
  out.add_prefix_space = bool_field(*pre, "add_prefix_space", false, file + ": pre_tokenizer");
}

void read_added_tokens(const json& root, const std::string& file, BpeModel& out) {
  const auto added = root.find("added_tokens");
  if (added == root.end() || added->is_null()) return;
  if (!added->is_array())
    throw Error(file + ": added_tokens is " + type_of(*added) + ", not an array");
  for (std::size_t i = 0; i < added->size(); ++i) {
    const json& token = (*added)[i];
    const std::string where = file + ": added_tokens[" + std::to_string(i) + "]";
    if (!token.is_object() || !token.contains("id") || !token["id"].is_number_integer() ||
        !token.contains("content") || !token["content"].is_string()) {
      throw Error(where + " is not an object with an integer id and a string content");
    }
    const std::int64_t id = token["id"].get<std::int64_t>();
    if (id < 0 || id > std::numeric_limits<std::int32_t>::max()) {
      throw Error(where + ".id is " + std::to_string(id) + ", not in [0, 2^31)");
    }
    if (bool_field(token, "single_word", false, where)) {
      throw Error(where +
                  ".single_word is true; vktower matches added tokens anywhere "
                  "(single_word false) only");
    }
    out.added_tokens.push_back({static_cast<std::int32_t>(id), token["content"].get<std::string>(),
                                bool_field(token, "lstrip", false, where),
                                bool_field(token, "rstrip", false, where)});
  }
}

}  // namespace

std::unique_ptr<BpeTokenizer> BpeTokenizer::from_tokenizer_json(const std::filesystem::path& path) {
  const json root = detail::read_json_file(path);
  const std::string file = "tokenizer.json " + quoted(path);
  if (!root.is_object()) throw Error(file + " is " + type_of(root) + ", not an object");
  const auto normalizer = root.find("normalizer");
  if (normalizer != root.end() && !normalizer->is_null()) {
    throw Error(file + ": normalizer is " +
                (normalizer->contains("type") ? (*normalizer)["type"].dump() : normalizer->dump()) +
                "; vktower's BPE supports tokenizers without a normalizer (null) only");
  }
  BpeModel model;
  model.source = file;
  const auto model_field = root.find("model");
  if (model_field == root.end()) throw Error(file + ": model is missing");
  try {
    read_bpe_model(*model_field, file, model);
    read_pre_tokenizer(root, file, model);
    read_added_tokens(root, file, model);
  } catch (const json::exception& e) {
    // The readers check each type before reading it; this is a backstop, so
    // that no malformed file escapes as anything but vkt::Error.
    throw Error(file + " could not be read: " + e.what());
  }
  return std::make_unique<BpeTokenizer>(std::move(model));
}

std::unique_ptr<BpeTokenizer> BpeTokenizer::from_vocab_and_merges(
    const std::filesystem::path& vocab_json, const std::filesystem::path& merges_txt,
    std::span<const std::string> special_tokens) {
  BpeModel model;
  model.source = "vocab.json " + quoted(vocab_json) + " with merges.txt " + quoted(merges_txt);
  model.vocab = read_vocab(detail::read_json_file(vocab_json), "vocab.json " + quoted(vocab_json));
  std::istringstream lines(detail::read_whole_file(merges_txt));
  std::string line;
  for (std::size_t number = 1; std::getline(lines, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (number == 1 && line.starts_with("#version"))) continue;
    model.merges.push_back(
        split_merge(line, "merges.txt " + quoted(merges_txt) + ": line " + std::to_string(number)));
  }
  for (const std::string& special : special_tokens) {
    const auto it = std::find_if(model.vocab.begin(), model.vocab.end(),
                                 [&](const auto& entry) { return entry.first == special; });
    if (it == model.vocab.end()) {
      throw Error(model.source + ": the special token '" + special +
                  "' is not in the vocabulary; add it to vocab.json or remove it from the config");
    }
    model.added_tokens.push_back({it->second, special});
  }
  return std::make_unique<BpeTokenizer>(std::move(model));
}

}  // namespace vkt::models
