#pragma once
// One tensor of a Hugging Face safetensors file, as its header describes it.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "../runtime/graph/shape.h"

namespace vkt::models {

/// A named tensor in a safetensors file: where its bytes lie and what they are.
/// Listing never converts anything; reading it (SafetensorsArchive) does.
struct SafetensorsEntry {
  /// The Hugging Face name, e.g. "model.layers.0.self_attn.q_proj.weight".
  std::string name;
  /// As the file says: "F32", "F16", "BF16", or another safetensors dtype
  /// ("I64", "F64", "U8", ...) that vktower lists but refuses to read.
  std::string dtype;
  /// Dimensions, outermost first (rank 0 is a scalar; a 0 is allowed).
  std::vector<std::int64_t> shape;
  /// The product of `shape` (checked: it fits, and so does its byte count).
  std::uint64_t elements = 0;
  /// The path of the file holding it.
  std::string file;
  /// Where its bytes start in `file` (past the header) and how many there are.
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;

  /// F32, F16 or BF16; none for the other dtypes.
  std::optional<DType> value_type() const;
  /// "[2, 3]"; a scalar is "[]".
  std::string shape_str() const;
};

/// Bytes one element of safetensors dtype `dtype` takes (1 to 8); none for a
/// name that is not a safetensors dtype.
std::optional<std::uint64_t> safetensors_dtype_bytes(const std::string& dtype);

/// The safetensors name of F32, F16 or BF16 ("F32", "F16", "BF16").
const char* safetensors_dtype_name(DType dtype);

}  // namespace vkt::models
