// models::decoder_weight_entries and DecoderWeights: Hugging Face names and
// layouts against vktower's variables.
#include "decoder_weights.h"

#include <fmt/format.h>

#include "../runtime/vulkan/error.h"

namespace vkt::models {
namespace {

/// Adds a module's weights to `out`.
class EntryList {
 public:
  explicit EntryList(std::vector<WeightEntry>& out) : out_(out) {}

  /// nn.Linear: weight [out, in] held as kernel [in, out], and a bias.
  void linear(const std::string& module, std::int64_t in, std::int64_t units, bool bias) {
    add(module, "weight", {units, in}, "kernel", WeightLayout::Transposed);
    if (bias) add(module, "bias", {units}, "bias", WeightLayout::Same);
  }
  /// GPT-2's Conv1D: weight [in, out], already a kernel, and a bias.
  void conv1d(const std::string& module, std::int64_t in, std::int64_t units) {
    add(module, "weight", {in, units}, "kernel", WeightLayout::Same);
    add(module, "bias", {units}, "bias", WeightLayout::Same);
  }
  /// A bias alone (a tied head's).
  void bias(const std::string& module, std::int64_t units) {
    add(module, "bias", {units}, "bias", WeightLayout::Same);
  }
  void embedding(const std::string& module, std::int64_t rows, std::int64_t width) {
    add(module, "weight", {rows, width}, "embeddings", WeightLayout::Same);
  }
  void rms_norm(const std::string& module, std::int64_t width) {
    add(module, "weight", {width}, "gamma", WeightLayout::Same);
  }
  void layer_norm(const std::string& module, std::int64_t width) {
    add(module, "weight", {width}, "gamma", WeightLayout::Same);
    add(module, "bias", {width}, "beta", WeightLayout::Same);
  }

 private:
  void add(const std::string& module, const char* hf_leaf, Shape shape, const char* role,
           WeightLayout layout) {
    out_.push_back(WeightEntry{.hf_name = module + "." + hf_leaf,
                               .hf_shape = std::move(shape),
                               .variable = module + "/" + role,
                               .layout = layout,
                               .module = module});
  }
  std::vector<WeightEntry>& out_;
};

/// The output projection: none when tied (the token table serves), but its
/// bias where the model has one.
void lm_head(const DecoderConfig& c, EntryList& list) {
  if (!c.tie_word_embeddings) {
    list.linear("lm_head", c.hidden_size, c.vocab_size, c.lm_head_bias);
  } else if (c.lm_head_bias) {
    list.bias("lm_head", c.vocab_size);
  }
}

void llama_entries(const DecoderConfig& c, EntryList& list) {
  const std::int64_t d = c.hidden_size, q = c.num_attention_heads * c.head_dim,
                     kv = c.num_key_value_heads * c.head_dim;
  list.embedding("model.embed_tokens", c.vocab_size, d);
  for (std::int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    list.rms_norm(p + "input_layernorm", d);
    list.linear(p + "self_attn.q_proj", d, q, c.q_bias);
    list.linear(p + "self_attn.k_proj", d, kv, c.k_bias);
    list.linear(p + "self_attn.v_proj", d, kv, c.v_bias);
    list.linear(p + "self_attn.o_proj", q, d, c.o_bias);
    list.rms_norm(p + "post_attention_layernorm", d);
    list.linear(p + "mlp.gate_proj", d, c.intermediate_size, c.mlp_bias);
    list.linear(p + "mlp.up_proj", d, c.intermediate_size, c.mlp_bias);
    list.linear(p + "mlp.down_proj", c.intermediate_size, d, c.mlp_bias);
  }
  list.rms_norm("model.norm", d);
  lm_head(c, list);
}

void gpt2_entries(const DecoderConfig& c, EntryList& list) {
  const std::int64_t d = c.hidden_size;
  list.embedding("transformer.wte", c.vocab_size, d);
  list.embedding("transformer.wpe", c.max_position_embeddings, d);
  for (std::int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = fmt::format("transformer.h.{}.", l);
    list.layer_norm(p + "ln_1", d);
    list.conv1d(p + "attn.c_attn", d, 3 * d);
    list.conv1d(p + "attn.c_proj", d, d);
    list.layer_norm(p + "ln_2", d);
    list.conv1d(p + "mlp.c_fc", d, c.intermediate_size);
    list.conv1d(p + "mlp.c_proj", c.intermediate_size, d);
  }
  list.layer_norm("transformer.ln_f", d);
  lm_head(c, list);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::vector<WeightEntry> decoder_weight_entries(const DecoderConfig& config) {
  std::vector<WeightEntry> out;
  EntryList list(out);
  if (config.architecture == Architecture::Gpt2) {
    gpt2_entries(config, list);
  } else {
    llama_entries(config, list);
  }
  return out;
}

Shape variable_shape(const WeightEntry& entry) {
  if (entry.layout == WeightLayout::Same) return entry.hf_shape;
  return Shape{entry.hf_shape[1], entry.hf_shape[0]};
}

bool ignored_checkpoint_entry(const DecoderConfig& config, const std::string& hf_name) {
  if (config.architecture == Architecture::Gpt2) {
    if (ends_with(hf_name, ".attn.bias") || ends_with(hf_name, ".attn.masked_bias")) return true;
  } else if (ends_with(hf_name, ".rotary_emb.inv_freq")) {
    return true;
  }
  return config.tie_word_embeddings && hf_name == "lm_head.weight";
}

std::vector<float> transposed_matrix(const std::vector<float>& m, std::int64_t rows,
                                     std::int64_t cols) {
  std::vector<float> t(m.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      t[static_cast<std::size_t>(c * rows + r)] = m[static_cast<std::size_t>(r * cols + c)];
    }
  }
  return t;
}

std::vector<float> to_variable_layout(const WeightEntry& entry, std::vector<float> values) {
  if (entry.layout == WeightLayout::Same) return values;
  return transposed_matrix(values, entry.hf_shape[0], entry.hf_shape[1]);
}

std::vector<float> to_checkpoint_layout(const WeightEntry& entry, std::vector<float> values) {
  if (entry.layout == WeightLayout::Same) return values;
  return transposed_matrix(values, entry.hf_shape[1], entry.hf_shape[0]);
}

std::optional<Initializer> DecoderWeights::initializer(const std::string& variable) const {
  const auto it = values_.find(variable);
  if (it == values_.end()) return std::nullopt;
  Initializer init{Initializer::Kind::Values, 0.0f, 0.0f};
  init.values = it->second.values;
  init.values_shape = it->second.shape;
  return init;
}

void DecoderWeights::set(const std::string& variable, const Shape& shape,
                         std::vector<float> values) {
  if (static_cast<std::int64_t>(values.size()) != shape.elements()) {
    throw Error(fmt::format("decoder weight '{}': shape {} needs {} values, {} were given",
                            variable, shape.str(), shape.elements(), values.size()));
  }
  values_[variable] = Stored{shape, std::make_shared<const std::vector<float>>(std::move(values))};
}

const std::vector<float>& DecoderWeights::values(const std::string& variable) const {
  const auto it = values_.find(variable);
  if (it == values_.end()) {
    throw Error(fmt::format("decoder weight '{}' is not among the loaded weights", variable));
  }
  return *it->second.values;
}

}  // namespace vkt::models
