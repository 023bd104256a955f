#include "peft_adapter.h"

#include <fmt/format.h>

#include <filesystem>

#include "../runtime/io/atomic_file.h"
#include "../runtime/vulkan/error.h"
#include "json_strict.h"

namespace vkt::models {

using nlohmann::json;
namespace fs = std::filesystem;

std::string lora_adapter_config_json(const LoraAdapterConfig& config) {
  if (config.r < 1 || !(config.lora_alpha > 0) ||
      !(config.lora_dropout >= 0 && config.lora_dropout < 1) || config.target_modules.empty()) {
    throw Error(fmt::format(
        "LoRA adapter config: r {} must be >= 1, lora_alpha {} > 0, "
        "lora_dropout {} in [0, 1), and target_modules must name the adapted "
        "modules ({} given)",
        config.r, config.lora_alpha, config.lora_dropout, config.target_modules.size()));
  }
  const json out = {{"peft_type", "LORA"},
                    {"task_type", "CAUSAL_LM"},
                    {"base_model_name_or_path", config.base_model_name_or_path},
                    {"r", config.r},
                    {"lora_alpha", config.lora_alpha},
                    {"lora_dropout", config.lora_dropout},
                    {"target_modules", config.target_modules},
                    {"bias", "none"},
                    {"fan_in_fan_out", config.fan_in_fan_out},
                    {"inference_mode", true}};
  return out.dump(2) + "\n";
}

std::string lora_weight_name(const std::string& module, bool b) {
  return fmt::format("base_model.model.{}.lora_{}.weight", module, b ? 'B' : 'A');
}

void write_lora_adapter(const std::string& directory, const LoraAdapterConfig& config,
                        std::span<const TensorToWrite> tensors) {
  const std::string text = lora_adapter_config_json(config);
  std::error_code ec;
  fs::create_directories(directory, ec);
  if (ec) {
    throw FileWriteError(
        fmt::format("writing adapter '{}': cannot create the directory ({}); "
                    "check the path and its permissions",
                    directory, ec.message()));
  }
  write_safetensors_file((fs::path(directory) / "adapter_model.safetensors").string(), tensors);
  write_file_atomically((fs::path(directory) / "adapter_config.json").string(), text);
}

}  // namespace vkt::models
