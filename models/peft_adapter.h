#pragma once
// LoRA adapters written in PEFT's layout: `adapter_config.json` and
// `adapter_model.safetensors`, which peft.PeftModel.from_pretrained loads on
// top of the base model.
//
// The tensors go through the safetensors writer under PEFT's names:
//   base_model.model.<module>.lora_A.weight   shape [r, in]
//   base_model.model.<module>.lora_B.weight   shape [out, r]
// where <module> is the adapted Linear's Hugging Face name, e.g.
// "model.layers.0.self_attn.q_proj" (Llama) or "transformer.h.0.attn.c_attn"
// (GPT-2, whose Conv1D stores its weight [in, out]: fan_in_fan_out true; A
// and B keep the shapes above). The adapted weight is W + (lora_alpha / r) * B A.
//
//   vkt::models::LoraAdapterConfig config{.base_model_name_or_path = "meta-llama/Llama-3.2-1B",
//       .r = 8, .lora_alpha = 16, .target_modules = {"q_proj", "v_proj"}};
//   vkt::models::write_lora_adapter("/out/adapter", config, tensors);

#include <span>
#include <string>
#include <vector>

#include "safetensors_writer.h"

namespace vkt::models {

/// The fields of PEFT's LoraConfig that vktower's adapters set (the file also
/// says peft_type "LORA", task_type "CAUSAL_LM", bias "none", inference_mode true).
struct LoraAdapterConfig {
  /// The base model's Hugging Face id or path.
  std::string base_model_name_or_path{};
  /// The adapters' rank.
  int r = 8;
  double lora_alpha = 8;
  double lora_dropout = 0;
  /// The adapted modules' last names, e.g. {"q_proj", "v_proj"} or {"c_attn"}.
  std::vector<std::string> target_modules{};
  /// True for GPT-2 (Conv1D weights are [in, out]).
  bool fan_in_fan_out = false;
};

/// adapter_config.json's text for `config` (checked: r >= 1, lora_alpha > 0,
/// lora_dropout in [0, 1), target_modules given; else a vkt::Error).
std::string lora_adapter_config_json(const LoraAdapterConfig& config);

/// PEFT's name of `module`'s A (`b` false) or B (`b` true) matrix:
/// lora_weight_name("model.layers.0.self_attn.q_proj", false) is
/// "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight".
std::string lora_weight_name(const std::string& module, bool b);

/// Writes adapter_config.json and adapter_model.safetensors (`tensors`, named
/// and shaped as above) into `directory` (created if missing), each atomically.
void write_lora_adapter(const std::string& directory, const LoraAdapterConfig& config,
                        std::span<const TensorToWrite> tensors);

}  // namespace vkt::models
