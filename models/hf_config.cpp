#include "hf_config.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "../runtime/vulkan/error.h"
#include "json_strict.h"

namespace vkt::models {
namespace {

using detail::json_quoted;
using nlohmann::json;
namespace fs = std::filesystem;

struct Family {
  Architecture architecture;
  const char* model_type;
  const char* architecture_name;
};
constexpr Family kFamilies[] = {
    {Architecture::Llama, "llama", "LlamaForCausalLM"},
    {Architecture::Llama, "mistral", "MistralForCausalLM"},
    {Architecture::Llama, "qwen2", "Qwen2ForCausalLM"},
    {Architecture::Gpt2, "gpt2", "GPT2LMHeadModel"},
};

// Reads the fields of one config.json; every error names the file.
class ConfigReader {
 public:
  ConfigReader(std::string path, const json& root) : path_(std::move(path)), root_(root) {}

  [[noreturn]] void refuse(const std::string& problem) const {
    throw Error(fmt::format("config '{}': {}", path_, problem));
  }

  // The field `key`, or null when absent (JSON null reads as absent too).
  const json* find(const char* key) const {
    const auto it = root_.find(key);
    return it == root_.end() || it->is_null() ? nullptr : &*it;
  }

  std::optional<std::int64_t> integer(const char* key, std::int64_t min = 1) const {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number_integer() || v->get<std::int64_t>() < min) {
      refuse(fmt::format("field \"{}\" is {}, not an integer >= {} (fix the value)", key,
                         json_quoted(v->dump()), min));
    }
    return v->get<std::int64_t>();
  }
  std::int64_t required(const char* key) const {
    const std::optional<std::int64_t> v = integer(key);
    if (!v) {
      refuse(
          fmt::format("field \"{}\" is missing (add it: the model's config.json from its "
                      "Hugging Face repository has it)",
                      key));
    }
    return *v;
  }
  std::optional<double> number(const char* key) const {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number() || !(v->get<double>() > 0)) {
      refuse(fmt::format("field \"{}\" is {}, not a number > 0 (fix the value)", key,
                         json_quoted(v->dump())));
    }
    return v->get<double>();
  }
  std::optional<bool> boolean(const char* key) const {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_boolean()) {
      refuse(fmt::format("field \"{}\" is {}, not true or false (fix the value)", key,
                         json_quoted(v->dump())));
    }
    return v->get<bool>();
  }
  std::optional<std::string> string(const char* key) const {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_string()) {
      refuse(fmt::format("field \"{}\" is {}, not a string (fix the value)", key,
                         json_quoted(v->dump())));
    }
    return v->get<std::string>();
  }
  // eos_token_id: an integer or a list of them.
  std::vector<std::int64_t> integers(const char* key) const {
    const json* v = find(key);
    if (v == nullptr) return {};
    std::vector<std::int64_t> out;
    for (const json& item : v->is_array() ? *v : json::array({*v})) {
      if (!item.is_number_integer() || item.get<std::int64_t>() < 0) {
        refuse(
            fmt::format("field \"{}\" is {}, not a token id >= 0 or a list of them (fix the "
                        "value)",
                        key, json_quoted(v->dump())));
      }
      out.push_back(item.get<std::int64_t>());
    }
    return out;
  }

 private:
  std::string path_;
  const json& root_;
};

const Family& family_of(const ConfigReader& config) {
  std::string names;
  for (const Family& f : kFamilies)
    names += fmt::format("{}{}", names.empty() ? "" : ", ", f.architecture_name);
  const json* architectures = config.find("architectures");
  if (architectures != nullptr) {
    if (!architectures->is_array() || architectures->empty() || !(*architectures)[0].is_string()) {
      config.refuse(
          "field \"architectures\" is not a list of class names (fix it or remove it "
          "and give \"model_type\")");
    }
    const std::string name = (*architectures)[0].get<std::string>();
    for (const Family& f : kFamilies) {
      if (name == f.architecture_name) return f;
    }
    config.refuse(fmt::format("architecture {} is not supported (vktower builds {})",
                              json_quoted(name), names));
  }
  const std::optional<std::string> type = config.string("model_type");
  if (!type) {
    config.refuse(
        "fields \"architectures\" and \"model_type\" are both missing (add "
        "\"architectures\": [\"LlamaForCausalLM\"] or the model's own)");
  }
  for (const Family& f : kFamilies) {
    if (*type == f.model_type) return f;
  }
  config.refuse(
      fmt::format("model_type {} is not supported (vktower builds {})", json_quoted(*type), names));
}

// The fields whose names differ between the families.
void read_shape_fields(const ConfigReader& c, DecoderConfig& out) {
  const bool gpt2 = out.architecture == Architecture::Gpt2;
  out.vocab_size = c.required("vocab_size");
  out.hidden_size = c.required(gpt2 ? "n_embd" : "hidden_size");
  out.num_hidden_layers = c.required(gpt2 ? "n_layer" : "num_hidden_layers");
  out.num_attention_heads = c.required(gpt2 ? "n_head" : "num_attention_heads");
  out.intermediate_size =
      gpt2 ? c.integer("n_inner").value_or(4 * out.hidden_size) : c.required("intermediate_size");
  out.num_key_value_heads =
      gpt2 ? out.num_attention_heads
           : c.integer("num_key_value_heads").value_or(out.num_attention_heads);
  out.max_position_embeddings =
      c.integer(gpt2 ? "n_positions" : "max_position_embeddings").value_or(gpt2 ? 1024 : 2048);
  out.norm_eps =
      c.number(gpt2 ? "layer_norm_epsilon" : "rms_norm_eps").value_or(gpt2 ? 1e-5 : 1e-6);
  const char* heads = gpt2 ? "n_head" : "num_attention_heads";
  if (out.hidden_size % out.num_attention_heads != 0) {
    c.refuse(fmt::format("\"{}\" {} does not divide the hidden size {} (fix either field)", heads,
                         out.num_attention_heads, out.hidden_size));
  }
  out.head_dim = gpt2 ? out.hidden_size / out.num_attention_heads
                      : c.integer("head_dim").value_or(out.hidden_size / out.num_attention_heads);
  if (out.num_attention_heads % out.num_key_value_heads != 0) {
    c.refuse(fmt::format("\"num_key_value_heads\" {} does not divide \"{}\" {} (fix either field)",
                         out.num_key_value_heads, heads, out.num_attention_heads));
  }
}

void read_layer_fields(const ConfigReader& c, DecoderConfig& out) {
  const bool gpt2 = out.architecture == Architecture::Gpt2;
  const char* act_key = gpt2 ? "activation_function" : "hidden_act";
  const char* expected_act = gpt2 ? "gelu_new" : "silu";
  out.hidden_act = c.string(act_key).value_or(expected_act);
  if (out.hidden_act != expected_act) {
    c.refuse(fmt::format("field \"{}\" is {}; vktower's {} decoder runs \"{}\" only", act_key,
                         json_quoted(out.hidden_act), out.family, expected_act));
  }
  if (gpt2) {
    out.q_bias = out.k_bias = out.v_bias = out.o_bias = out.mlp_bias = true;
  } else if (out.family == "qwen2") {
    out.q_bias = out.k_bias = out.v_bias = true;
  } else {
    out.q_bias = out.k_bias = out.v_bias = out.o_bias = c.boolean("attention_bias").value_or(false);
    out.mlp_bias = c.boolean("mlp_bias").value_or(false);
  }
  out.tie_word_embeddings = c.boolean("tie_word_embeddings").value_or(gpt2);
  out.rope_theta = c.number("rope_theta").value_or(10000);
  if (c.find("rope_scaling") != nullptr) {
    c.refuse(
        "rope_scaling is not supported (vktower's rotary positions are unscaled: use a "
        "model without it)");
  }
  out.bos_token_id = c.integer("bos_token_id", 0);
  out.eos_token_ids = c.integers("eos_token_id");
  out.torch_dtype = c.string("torch_dtype").value_or("");
  const bool windowed = out.family == "mistral" ||
                        (out.family == "qwen2" && c.boolean("use_sliding_window").value_or(false));
  if (windowed) out.sliding_window = c.integer("sliding_window");
}

}  // namespace

DecoderConfig parse_decoder_config(const std::string& path, std::string_view text) {
  const json root = detail::parse_json_strict(text, fmt::format("config '{}'", path));
  const ConfigReader reader(path, root);
  if (!root.is_object()) reader.refuse("it is not a JSON object (is this a config.json?)");
  const Family& family = family_of(reader);
  DecoderConfig out;
  out.path = path;
  out.architecture = family.architecture;
  out.architecture_name = family.architecture_name;
  out.family = family.model_type;
  read_shape_fields(reader, out);
  read_layer_fields(reader, out);
  out.json_text = std::string(text);
  return out;
}

DecoderConfig read_decoder_config(const std::string& path) {
  std::error_code ec;
  const std::string file =
      fs::is_directory(path, ec) ? (fs::path(path) / "config.json").string() : path;
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  if (!(in && text << in.rdbuf())) {
    throw Error(
        fmt::format("config '{}' cannot be read (download the model's config.json beside "
                    "its weights, or check the path)",
                    file));
  }
  return parse_decoder_config(file, std::move(text).str());
}

const char* to_string(Architecture architecture) {
  return architecture == Architecture::Gpt2 ? "Gpt2" : "Llama";
}

}  // namespace vkt::models
