#pragma once
// A Hugging Face model directory in and out: its weights read into a
// decoder's variables, and a fine-tuned decoder written back as the merged
// model (the original's names, layout and dtypes) or as PEFT adapters.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "decoder.h"
#include "decoder_weights.h"
#include "hf_config.h"

namespace vkt::models {

/// A model directory's config and weights, every check done on the host
/// before any device work.
struct PretrainedDecoder {
  DecoderConfig config;
  DecoderWeights weights;
  /// Each weight's Hugging Face dtype ("BF16", ...), by its Hugging Face
  /// name: what an export writes it back as.
  std::map<std::string, DType> stored_dtypes;
};

/// Reads `directory`'s config.json and its checkpoint (model.safetensors or a
/// sharded one), every entry by its Hugging Face name, transposed and split
/// to vktower's layout. A name the architecture has no weight for, a missing
/// weight and a shape that does not match config.json are each a vkt::Error
/// naming the entry and the file.
///
///   const vkt::models::PretrainedDecoder model = vkt::models::load_pretrained("tiny-llama");
PretrainedDecoder load_pretrained(const std::string& directory);

/// A variable's current value by its vktower name (what a checkpoint or a
/// trained run holds); a vkt::Error for a name it lacks.
using VariableValues = std::function<std::vector<float>(const std::string& variable)>;

/// Writes the fine-tuned model into `directory` in `model`'s layout: every
/// weight under its Hugging Face name and stored dtype, a LoRA-adapted
/// projection merged (kernel + alpha / r * lora_a lora_b), and the original
/// config.json; a program that loaded the original loads it. `values` gives
/// the trained variables.
void export_merged(const std::string& directory, const PretrainedDecoder& model,
                   const DecoderOptions& options, const VariableValues& values);

/// Writes the adapters alone as PEFT does: adapter_model.safetensors
/// ("base_model.model.<module>.lora_A.weight" [r, in] and "...lora_B.weight"
/// [out, r]) and adapter_config.json (r, lora_alpha, target_modules).
/// `base_model` is what adapter_config.json names as the base.
void export_adapters(const std::string& directory, const PretrainedDecoder& model,
                     const DecoderOptions& options, const VariableValues& values,
                     const std::string& base_model);

}  // namespace vkt::models
