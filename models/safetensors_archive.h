#pragma once
// A Hugging Face checkpoint on disk: `model.safetensors`, or the shards that
// `model.safetensors.index.json` maps names to. Host only (no Vulkan); every
// check runs when it is opened, before any device work.
//
//   auto archive = vkt::models::SafetensorsArchive::open("/models/llama-tiny");
//   for (const auto& e : archive.entries()) std::cout << e.name << e.shape_str() << "\n";
//   archive.check_shape("model.embed_tokens.weight", {vocab, hidden});
//   std::vector<float> w = archive.read_floats("model.embed_tokens.weight");

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "safetensors_entry.h"

namespace vkt::models {

/// The entries of a checkpoint (one file or shards), opened and checked; data
/// is read per entry (a seek and a read), never a whole file.
class SafetensorsArchive {
 public:
  /// Opens `path`: a directory (its model.safetensors, else its
  /// model.safetensors.index.json, as Hugging Face prefers them), a
  /// .safetensors file, or an index .json. Every file's header is read and
  /// checked now; a shard named in weight_map must be a plain file name in the
  /// index's directory that exists, and the index and the shards must agree on
  /// every name. Throws vkt::Error naming the file (and entry) and the problem.
  static SafetensorsArchive open(const std::string& path);

  /// The file opened: model.safetensors or the index.
  const std::string& path() const { return path_; }
  /// Every entry, sorted by name (any dtype; reading checks it).
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  /// The entry called `name`, or null.
  const SafetensorsEntry* find(std::string_view name) const;
  /// The entry called `name`; throws vkt::Error naming it and the checkpoint.
  const SafetensorsEntry& entry(std::string_view name) const;
  /// Throws vkt::Error naming the entry, its file, both shapes and `source`
  /// (e.g. the config.json path) unless `name` exists with shape `expected`.
  void check_shape(std::string_view name, std::span<const std::int64_t> expected,
                   const std::string& source = "the config") const;

  /// An F32, F16 or BF16 entry's values as f32 (f16 and bf16 widen exactly).
  /// Any other dtype is a vkt::Error naming the entry, its dtype and file.
  std::vector<float> read_floats(std::string_view name) const;
  /// An F16 or BF16 entry's 16-bit words as stored (a half frozen base without
  /// a round trip through f32); an F32 entry is a vkt::Error.
  std::vector<std::uint16_t> read_half_bits(std::string_view name) const;

 private:
  std::string path_;
  std::vector<SafetensorsEntry> entries_;
};

}  // namespace vkt::models
