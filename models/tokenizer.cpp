// Tokenizer's shared part and load_tokenizer: which files, and BOS/EOS from the configs.
#include "tokenizer.h"

#include "../runtime/vulkan/error.h"
#include "bpe_tokenizer.h"
#include "detail/json_file.h"
#include "sentencepiece_tokenizer.h"

namespace vkt::models {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

/// What a model folder's config files say about BOS and EOS, by priority.
struct ConfigTokens {
  std::optional<std::string> bos_token, eos_token;  // vocabulary strings
  std::string bos_from, eos_from;                   // the files that named them
  std::optional<std::int32_t> bos_id, eos_id;       // config.json's ids
  std::optional<bool> add_bos, add_eos;
};

/// A special token as tokenizer configs write it: "<s>", or an AddedToken
/// object {"content": "<s>", ...}; null or absent says nothing.
std::optional<std::string> token_string(const json& config, const char* name,
                                        const fs::path& file) {
  const auto it = config.find(name);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  throw Error("'" + file.string() + "': " + name + " is " + it->dump() +
              ", neither a string nor an object with a string content");
}

std::optional<bool> bool_field(const json& config, const char* name, const fs::path& file) {
  const auto it = config.find(name);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) {
    throw Error("'" + file.string() + "': " + name + " is " + it->dump() + ", not true or false");
  }
  return it->get<bool>();
}

/// config.json's bos_token_id / eos_token_id: an id, or a list whose first is taken.
std::optional<std::int32_t> id_field(const json& config, const char* name, const fs::path& file) {
  auto it = config.find(name);
  if (it == config.end() || it->is_null()) return std::nullopt;
  const json& value = it->is_array() && !it->empty() ? it->front() : *it;
  if (!value.is_number_integer() || value.get<std::int64_t>() < 0 ||
      value.get<std::int64_t>() > std::numeric_limits<std::int32_t>::max()) {
    throw Error("'" + file.string() + "': " + name + " is " + it->dump() +
                ", not a token id (an integer from 0)");
  }
  return static_cast<std::int32_t>(value.get<std::int64_t>());
}

json object_file(const fs::path& path) {
  json config = detail::read_json_file(path);
  if (!config.is_object()) throw Error("'" + path.string() + "' is not a JSON object");
  return config;
}

ConfigTokens read_configs(const fs::path& dir) {
  ConfigTokens out;
  // Lowest priority first, so that later files overwrite what earlier ones said.
  if (const fs::path path = dir / "config.json"; fs::exists(path)) {
    const json config = object_file(path);
    out.bos_id = id_field(config, "bos_token_id", path);
    out.eos_id = id_field(config, "eos_token_id", path);
  }
  for (const char* name : {"special_tokens_map.json", "tokenizer_config.json"}) {
    const fs::path path = dir / name;
    if (!fs::exists(path)) continue;
    const json config = object_file(path);
    if (auto bos = token_string(config, "bos_token", path))
      out.bos_token = bos, out.bos_from = path;
    if (auto eos = token_string(config, "eos_token", path))
      out.eos_token = eos, out.eos_from = path;
    if (auto add = bool_field(config, "add_bos_token", path)) out.add_bos = add;
    if (auto add = bool_field(config, "add_eos_token", path)) out.add_eos = add;
  }
  return out;
}

std::optional<std::int32_t> resolve(const Tokenizer& tokenizer,
                                    const std::optional<std::string>& token,
                                    const std::string& from, const char* name) {
  if (!token) return std::nullopt;
  const auto id = tokenizer.piece_to_id(*token);
  if (!id) {
    throw Error("'" + from + "': " + name + " '" + *token +
                "' is not in the tokenizer's vocabulary; the config and the tokenizer files "
                "do not belong together");
  }
  return id;
}

}  // namespace

std::vector<std::int32_t> Tokenizer::encode(std::string_view text,
                                            const EncodeOptions& options) const {
  const bool add_bos = options.add_bos.value_or(special_.add_bos);
  const bool add_eos = options.add_eos.value_or(special_.add_eos);
  if (add_bos && !special_.bos_id) {
    throw Error(
        "encode: add_bos is true but this tokenizer has no BOS token; encode with "
        "{.add_bos = false}");
  }
  if (add_eos && !special_.eos_id) {
    throw Error(
        "encode: add_eos is true but this tokenizer has no EOS token; encode with "
        "{.add_eos = false}");
  }
  std::vector<std::int32_t> ids;
  if (add_bos) ids.push_back(*special_.bos_id);
  std::vector<std::int32_t> body = encode_text(text);
  ids.insert(ids.end(), body.begin(), body.end());
  if (add_eos) ids.push_back(*special_.eos_id);
  return ids;
}

void Tokenizer::set_special_tokens(const SpecialTokens& special) {
  for (const auto& [id, name] :
       {std::pair{special.bos_id, "BOS"}, std::pair{special.eos_id, "EOS"}}) {
    if (id && (*id < 0 || *id >= vocab_size())) {
      throw Error(std::string("the ") + name + " id " + std::to_string(*id) +
                  " is outside the vocabulary [0, " + std::to_string(vocab_size()) + ")");
    }
  }
  if (special.add_bos && !special.bos_id) {
    throw Error("add_bos is true but there is no BOS id; set bos_id or add_bos = false");
  }
  if (special.add_eos && !special.eos_id) {
    throw Error("add_eos is true but there is no EOS id; set eos_id or add_eos = false");
  }
  special_ = special;
}

std::unique_ptr<Tokenizer> load_tokenizer(const fs::path& model_dir) {
  if (!fs::is_directory(model_dir)) {
    throw Error("model folder '" + model_dir.string() +
                "' is not a directory; pass the folder that holds the model's tokenizer files");
  }
  const ConfigTokens config = read_configs(model_dir);
  std::unique_ptr<Tokenizer> tokenizer;
  bool sentencepiece = false;
  if (fs::exists(model_dir / "tokenizer.model")) {
    tokenizer = std::make_unique<SentencePieceTokenizer>(model_dir / "tokenizer.model");
    sentencepiece = true;
  } else if (fs::exists(model_dir / "tokenizer.json")) {
    tokenizer = BpeTokenizer::from_tokenizer_json(model_dir / "tokenizer.json");
  } else if (fs::exists(model_dir / "vocab.json") && fs::exists(model_dir / "merges.txt")) {
    std::vector<std::string> specials;
    for (const auto& token : {config.bos_token, config.eos_token}) {
      if (token) specials.push_back(*token);
    }
    tokenizer = BpeTokenizer::from_vocab_and_merges(model_dir / "vocab.json",
                                                    model_dir / "merges.txt", specials);
  } else {
    throw Error("model folder '" + model_dir.string() +
                "' has no tokenizer: looked for tokenizer.model (SentencePiece), tokenizer.json "
                "(byte-level BPE) and vocab.json with merges.txt (byte-level BPE)");
  }

  SpecialTokens special = tokenizer->special_tokens();
  if (config.bos_id) special.bos_id = config.bos_id;
  if (config.eos_id) special.eos_id = config.eos_id;
  if (auto id = resolve(*tokenizer, config.bos_token, config.bos_from, "bos_token"))
    special.bos_id = id;
  if (auto id = resolve(*tokenizer, config.eos_token, config.eos_from, "eos_token"))
    special.eos_id = id;
  // Hugging Face's Llama tokenizer puts BOS first unless told not to; GPT-2's adds nothing.
  special.add_bos = config.add_bos.value_or(sentencepiece && special.bos_id.has_value());
  special.add_eos = config.add_eos.value_or(false);
  try {
    tokenizer->set_special_tokens(special);
  } catch (const Error& e) {
    throw Error("model folder '" + model_dir.string() + "': " + e.what());
  }
  return tokenizer;
}

}  // namespace vkt::models
