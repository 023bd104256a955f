#pragma once
// Values on the host: a tensor of f32 or i32 values with its shape, and a
// batch of named ones (what data sets produce and models are fed).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "../graph/shape.h"

namespace vkt {

/// Values on the host with their shape; f32 or i32.
struct HostTensor {
  Shape shape;
  DType dtype = DType::F32;
  std::vector<float> f32;
  std::vector<std::int32_t> i32;

  static HostTensor floats(Shape shape, std::vector<float> values);
  static HostTensor ints(Shape shape, std::vector<std::int32_t> values);

  /// Dimension 0: the examples (0 for a scalar).
  std::int64_t rows() const { return shape.rank() == 0 ? 0 : shape[0]; }
  /// Rows [begin, begin + count).
  HostTensor slice_rows(std::int64_t begin, std::int64_t count) const;
  /// `count` rows: these, then copies of them from the first on (padding of a
  /// short batch with real values, so nothing in it is out of range).
  HostTensor padded_rows(std::int64_t count) const;
  /// Appends `other`'s rows (same dtype and row shape; vkt::Error otherwise).
  void append_rows(const HostTensor& other);
};

/// Named host tensors: the features or the labels of a batch.
using HostBatch = std::map<std::string, HostTensor>;

}  // namespace vkt
