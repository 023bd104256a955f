// models::load_pretrained, export_merged and export_adapters: Hugging Face
// names and layouts on the host, around the safetensors archive and writer.
#include "pretrained.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "../runtime/vulkan/error.h"
#include "peft_adapter.h"
#include "safetensors_archive.h"
#include "safetensors_writer.h"

namespace vkt::models {
namespace {

/// Every check of the archive against the config: unknown entries, missing
/// ones and shapes, before anything is read.
void check_entries(const SafetensorsArchive& archive, const DecoderConfig& config,
                   const std::vector<WeightEntry>& expected) {
  std::set<std::string> known;
  for (const WeightEntry& e : expected) known.insert(e.hf_name);
  for (const SafetensorsEntry& entry : archive.entries()) {
    if (known.count(entry.name) != 0 || ignored_checkpoint_entry(config, entry.name)) continue;
    throw Error(fmt::format(
        "{}: entry '{}' is not a weight of a {} model ({}); is this checkpoint for another "
        "architecture, or config.json for another model?",
        entry.file, entry.name, config.architecture_name, config.path));
  }
  for (const WeightEntry& e : expected) {
    if (archive.find(e.hf_name) == nullptr) {
      throw Error(fmt::format(
          "{}: the checkpoint has no entry '{}', which a {} model with this config.json ({}) "
          "needs; is the checkpoint complete?",
          archive.path(), e.hf_name, config.architecture_name, config.path));
    }
    const std::vector<std::int64_t> dims(e.hf_shape.dims().begin(), e.hf_shape.dims().end());
    archive.check_shape(e.hf_name, dims, config.path);
  }
}

/// The value of each adapted projection's merged kernel [in, out].
std::vector<float> merged_kernel(const WeightEntry& e, const DecoderOptions& options,
                                 const VariableValues& values) {
  std::vector<float> kernel = values(e.variable);
  const Shape shape = variable_shape(e);  // [in, out]
  const std::int64_t in = shape[0], out = shape[1], r = options.lora->rank;
  const std::vector<float> a = values(e.module + "/lora_a");  // [in, r]
  const std::vector<float> b = values(e.module + "/lora_b");  // [r, out]
  const double scale = static_cast<double>(options.lora->alpha) / static_cast<double>(r);
  for (std::int64_t i = 0; i < in; ++i) {
    for (std::int64_t j = 0; j < out; ++j) {
      double sum = 0;
      for (std::int64_t k = 0; k < r; ++k) {
        sum += static_cast<double>(a[static_cast<std::size_t>(i * r + k)]) *
               static_cast<double>(b[static_cast<std::size_t>(k * out + j)]);
      }
      float& w = kernel[static_cast<std::size_t>(i * out + j)];
      w = static_cast<float>(static_cast<double>(w) + scale * sum);
    }
  }
  return kernel;
}

bool adapted(const WeightEntry& e, const DecoderConfig& config, const DecoderOptions& options) {
  if (!options.lora || e.variable != e.module + "/kernel") return false;
  return lora_targeted(
      e.module, options.lora_targets.empty() ? default_lora_targets(config) : options.lora_targets);
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw Error(fmt::format("{}: could not be written", path.string()));
}

}  // namespace

PretrainedDecoder load_pretrained(const std::string& directory) {
  PretrainedDecoder model;
  model.config = read_decoder_config(directory);
  const SafetensorsArchive archive = SafetensorsArchive::open(directory);
  const std::vector<WeightEntry> expected = decoder_weight_entries(model.config);
  check_entries(archive, model.config, expected);
  for (const WeightEntry& e : expected) {
    const SafetensorsEntry& entry = archive.entry(e.hf_name);
    model.stored_dtypes[e.hf_name] = entry.value_type().value_or(DType::F32);
    model.weights.set(e.variable, variable_shape(e),
                      to_variable_layout(e, archive.read_floats(e.hf_name)));
  }
  return model;
}

void export_merged(const std::string& directory, const PretrainedDecoder& model,
                   const DecoderOptions& options, const VariableValues& values) {
  std::vector<TensorToWrite> tensors;
  for (const WeightEntry& e : decoder_weight_entries(model.config)) {
    std::vector<float> v =
        adapted(e, model.config, options) ? merged_kernel(e, options, values) : values(e.variable);
    const auto dtype = model.stored_dtypes.find(e.hf_name);
    tensors.push_back(TensorToWrite{
        .name = e.hf_name,
        .shape = std::vector<std::int64_t>(e.hf_shape.dims().begin(), e.hf_shape.dims().end()),
        .dtype = dtype == model.stored_dtypes.end() ? DType::F32 : dtype->second,
        .values = to_checkpoint_layout(e, std::move(v))});
  }
  write_checkpoint(directory, tensors);
  write_text(std::filesystem::path(directory) / "config.json", model.config.json_text);
}

void export_adapters(const std::string& directory, const PretrainedDecoder& model,
                     const DecoderOptions& options, const VariableValues& values,
                     const std::string& base_model) {
  if (!options.lora) throw Error("export_adapters: the decoder was built without LoRA adapters");
  const std::int64_t r = options.lora->rank;
  std::vector<TensorToWrite> tensors;
  for (const WeightEntry& e : decoder_weight_entries(model.config)) {
    if (!adapted(e, model.config, options)) continue;
    const Shape shape = variable_shape(e);  // [in, out]
    // vktower's a [in, r] and b [r, out] are PEFT's A [r, in] and B [out, r] transposed.
    tensors.push_back(
        TensorToWrite{.name = lora_weight_name(e.module, false),
                      .shape = {r, shape[0]},
                      .values = transposed_matrix(values(e.module + "/lora_a"), shape[0], r)});
    tensors.push_back(
        TensorToWrite{.name = lora_weight_name(e.module, true),
                      .shape = {shape[1], r},
                      .values = transposed_matrix(values(e.module + "/lora_b"), r, shape[1])});
  }
  const LoraAdapterConfig config{.base_model_name_or_path = base_model,
                                 .r = static_cast<int>(r),
                                 .lora_alpha = options.lora->alpha,
                                 .target_modules = options.lora_targets.empty()
                                                       ? default_lora_targets(model.config)
                                                       : options.lora_targets,
                                 .fan_in_fan_out = model.config.architecture == Architecture::Gpt2};
  write_lora_adapter(directory, config, tensors);
}

}  // namespace vkt::models
