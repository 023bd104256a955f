#pragma once
// A decoder's weights by name: the Hugging Face entries of a checkpoint and
// the vktower variables they become, with the layout change between the two.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../runtime/graph/initializer.h"
#include "../runtime/graph/shape.h"
#include "hf_config.h"

namespace vkt::models {

/// How a Hugging Face tensor is laid out against its vktower variable.
enum class WeightLayout {
  Same,        ///< the same values in the same order (norms, biases, embeddings, GPT-2's Conv1D)
  Transposed,  ///< a 2-D [out, in] nn.Linear weight, held as an [in, out] kernel
};

/// One weight of a decoder: its Hugging Face name and shape, the variable
/// that holds it in vktower and how the two are laid out.
struct WeightEntry {
  std::string hf_name;   ///< "model.layers.0.self_attn.q_proj.weight"
  Shape hf_shape;        ///< as stored in the checkpoint ([out, in] for a Linear)
  std::string variable;  ///< "model.layers.0.self_attn.q_proj/kernel"
  WeightLayout layout = WeightLayout::Same;
  /// The module the weight belongs to ("model.layers.0.self_attn.q_proj"),
  /// which LoRA targets match.
  std::string module;
};

/// Every weight a model of `config` has, in checkpoint order (embeddings,
/// then each layer, then the final norm and head). A tied head has no entry.
std::vector<WeightEntry> decoder_weight_entries(const DecoderConfig& config);

/// The shape of `entry`'s variable (the checkpoint's, transposed for a Linear).
Shape variable_shape(const WeightEntry& entry);

/// Checkpoint entries a model has no weight for and that Hugging Face itself
/// skips on load: buffers older exports saved (GPT-2's attn.bias and
/// attn.masked_bias, Llama's rotary_emb.inv_freq) and the tied head's copy.
bool ignored_checkpoint_entry(const DecoderConfig& config, const std::string& hf_name);

/// A decoder's pretrained values, by variable name, in vktower's layout, each
/// shared so every tower's initializer reads one copy.
class DecoderWeights {
 public:
  DecoderWeights() = default;
  /// The values of `variable` as an initializer (Initializer::Kind::Values),
  /// or nothing when the weights do not hold it (a fresh adapter).
  std::optional<Initializer> initializer(const std::string& variable) const;
  /// Sets `variable`'s values (shape.elements() of them).
  void set(const std::string& variable, const Shape& shape, std::vector<float> values);
  /// The values of `variable`; a vkt::Error naming it when absent.
  const std::vector<float>& values(const std::string& variable) const;
  bool contains(const std::string& variable) const { return values_.count(variable) != 0; }
  std::size_t size() const { return values_.size(); }

 private:
  struct Stored {
    Shape shape;
    std::shared_ptr<const std::vector<float>> values;
  };
  std::map<std::string, Stored> values_;
};

/// A row-major [rows, cols] matrix transposed.
std::vector<float> transposed_matrix(const std::vector<float>& m, std::int64_t rows,
                                     std::int64_t cols);
/// `values` (the checkpoint's order) in the variable's layout.
std::vector<float> to_variable_layout(const WeightEntry& entry, std::vector<float> values);
/// `values` (the variable's order) in the checkpoint's layout.
std::vector<float> to_checkpoint_layout(const WeightEntry& entry, std::vector<float> values);

}  // namespace vkt::models
