#pragma once
// Writes Hugging Face checkpoints: `model.safetensors`, or past a shard size
// `model-00001-of-0000N.safetensors` shards and `model.safetensors.index.json`,
// laid out as transformers' save_pretrained writes them, so that a program
// that loaded the original model loads the written one.
//
//   std::vector<vkt::models::TensorToWrite> tensors{
//       {.name = "model.norm.weight", .shape = {64}, .dtype = vkt::DType::BF16,
//        .values = norm_weights}};
//   vkt::models::write_checkpoint("/out/llama-tuned", tensors);

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "../runtime/graph/shape.h"

namespace vkt::models {

/// One named tensor to write.
struct TensorToWrite {
  /// The Hugging Face name, e.g. "lm_head.weight".
  std::string name{};
  /// Dimensions, outermost first (rank 0 is a scalar).
  std::vector<std::int64_t> shape{};
  /// Stored as F32, F16 or BF16.
  DType dtype = DType::F32;
  /// The product of `shape` values, rounded to `dtype` (half.h) when it is a
  /// half type. Leave empty when `half_bits` holds the tensor.
  std::vector<float> values{};
  /// For F16 / BF16: the stored 16-bit words as they are (a frozen half base
  /// written back without a round trip); used when `values` is empty.
  std::vector<std::uint16_t> half_bits{};
};

/// How write_checkpoint splits a checkpoint.
struct CheckpointWriteOptions {
  /// A shard holds tensors (sorted by name) while their bytes stay within
  /// this (a larger tensor gets a shard of its own): transformers' default 5 GB.
  std::uint64_t max_shard_bytes = 5'000'000'000;
};

/// The bytes of a safetensors file holding `tensors` (sorted by name in the
/// header and the data), with "__metadata__" `metadata` (e.g. {"format":
/// "pt"}). Throws vkt::Error naming `path` and the tensor for a duplicate or
/// reserved name, a dtype other than F32/F16/BF16, or values that do not
/// match the shape.
std::vector<char> encode_safetensors(const std::string& path,
                                     std::span<const TensorToWrite> tensors,
                                     const std::map<std::string, std::string>& metadata);

/// Writes `tensors` as one safetensors file at `path` (atomically, metadata
/// {"format": "pt"}): e.g. PEFT's adapter_model.safetensors.
void write_safetensors_file(const std::string& path, std::span<const TensorToWrite> tensors);

/// Writes `tensors` into `directory` (created if missing) as model.safetensors,
/// or as shards and model.safetensors.index.json ({"metadata": {"total_size":
/// data bytes}, "weight_map": name -> shard}) when they exceed one shard.
/// Each file is replaced atomically, the index last; the other layout's entry
/// file (model.safetensors or the index) left from an earlier write is
/// removed so that loaders find this one. Returns the file names written.
std::vector<std::string> write_checkpoint(const std::string& directory,
                                          std::span<const TensorToWrite> tensors,
                                          const CheckpointWriteOptions& options = {});

}  // namespace vkt::models
