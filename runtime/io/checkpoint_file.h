#pragma once
// The bytes of a checkpoint file (internal): encoding and checked decoding of
// vktower's safetensors files, host side only (no Graph, no Vulkan), so the
// fuzz targets exercise exactly what load_checkpoint and read_checkpoint run.
//
// A file is a u64 little-endian header length, a JSON header padded with spaces
// to 8 bytes, and the data section. The header's "__metadata__" (strings, as
// safetensors requires) holds:
//   "format"        "vktower-2"
//   "global_step"   decimal
//   "crc32"         zlib crc32 of the data section, decimal
//   "header_crc32"  zlib crc32 of the length field and the header, computed with
//                   this field's own 8 hex digits read as "00000000"
//   "variables"     a JSON string listing every tensor's name and shape in data order
//                   (and "optional": true for a variable a model may lack)
//   "shard_weights" optional: the towers' measured shard weights, decimals
//                   joined by commas (ReplicateOptions::ShardSplit::Measured)
// Together the two checksums cover every byte of the file. Files of format
// "vktower" (written before header_crc32 existed) are still read: every header
// field is cross-checked against the listing and the data, but their header has
// no checksum.

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "../graph/shape.h"

namespace vkt::detail {

/// One tensor to write: its name, shape and shape.elements() values.
struct CheckpointTensor {
  std::string name;
  Shape shape;
  std::vector<float> values;
  /// F32, or F16 / BF16 (a half variable's; `values` are rounded to it).
  DType dtype = DType::F32;
  /// Variable::optional_in_checkpoint: a model without it loads the file too.
  bool optional = false;
};

/// The whole file for `tensors` (in this order in the data section) at
/// `global_step`; `path` (where it will be written) names errors.
std::vector<char> encode_checkpoint(const std::string& path,
                                    std::span<const CheckpointTensor> tensors,
                                    std::uint64_t global_step,
                                    std::span<const double> shard_weights = {});

/// Where a tensor's values lie in the data section.
struct CheckpointEntry {
  Shape shape;
  /// F32, F16 or BF16 (a half variable's, or another program's tensor; read
  /// as f32, exactly).
  DType dtype = DType::F32;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  /// Listed "optional" (CheckpointTensor::optional): a graph without it
  /// still takes the file.
  bool optional = false;
};

/// A checkpoint file's bytes, every field checked.
class CheckpointFile {
 public:
  /// Checks `bytes` (the contents of `path`, which every error names): the
  /// header, its checksum, each tensor's dtype, shape and offsets against the
  /// listing and the data; with `check_data`, the data's checksum too. Throws
  /// vkt::Error naming `path` and the first problem. With `any_safetensors`, a
  /// file without vktower's metadata (another program's safetensors file) is
  /// taken too: its tensors checked for shape and offsets (contiguous,
  /// covering the data), at global step 0; it has no checksum to check.
  CheckpointFile(std::string path, std::vector<char> bytes, bool check_data = true,
                 bool any_safetensors = false);
  /// Reads and checks the file at `path`.
  static CheckpointFile read(const std::string& path, bool check_data = true,
                             bool any_safetensors = false);
  /// Reads the length field and the header alone, every check of read()
  /// without `check_data` (the entries against the file's size): the step,
  /// the shard weights and the entries of a model's checkpoint without reading
  /// its data. values() is an error.
  static CheckpointFile read_header(const std::string& path, bool any_safetensors = false);

  const std::string& path() const { return path_; }
  std::uint64_t global_step() const { return step_; }
  /// The measured shard weights the file records (each finite and above 0),
  /// or none.
  const std::vector<double>& shard_weights() const { return shard_weights_; }
  const std::map<std::string, CheckpointEntry>& entries() const { return entries_; }
  /// The values of tensor `name` (one of entries()).
  std::vector<float> values(const std::string& name) const;

 private:
  // `file_size`: `bytes` are its first bytes, the header's end at least (no
  // data); none: `bytes` are the whole file.
  CheckpointFile(std::string path, std::vector<char> bytes, std::optional<std::uint64_t> file_size,
                 bool check_data, bool any_safetensors);

  std::string path_;
  std::vector<char> bytes_;
  bool has_data_ = true;
  std::uint64_t data_offset_ = 0;
  std::map<std::string, CheckpointEntry> entries_;
  std::uint64_t step_ = 0;
  std::vector<double> shard_weights_;
};

}  // namespace vkt::detail
