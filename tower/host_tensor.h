#pragma once
// A batch on the host: named tensors of f32 or i32 values, and its split into
// one shard per tower.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "../runtime/graph/shape.h"

namespace vkt {

/// Values on the host with their shape; f32 or i32.
struct HostTensor {
  Shape shape;
  DType dtype = DType::F32;
  std::vector<float> f32;
  std::vector<std::int32_t> i32;

  static HostTensor floats(Shape shape, std::vector<float> values);
  static HostTensor ints(Shape shape, std::vector<std::int32_t> values);
};

/// Named host tensors: the features or the labels of a batch.
using HostBatch = std::map<std::string, HostTensor>;

/// Splits every entry along dimension 0 into `towers` equal shards, in order.
/// A batch that does not divide is a vkt::Error naming the batch size, the entry
/// and the tower count.
std::vector<HostBatch> shard(const HostBatch& batch, int towers);

}  // namespace vkt
