#include "sharding.h"

#include <fmt/format.h>

#include "../runtime/vulkan/error.h"

namespace vkt {

std::vector<HostBatch> shard(const HostBatch& batch, int towers) {
  if (towers < 1) throw Error("shard: the tower count must be at least 1");
  std::vector<HostBatch> shards(towers);
  for (const auto& [name, t] : batch) {
    if (t.shape.rank() == 0) {
      throw Error(
          fmt::format("'{}' is a scalar; batch entries need a batch dimension 0 to split "
                      "among the towers",
                      name));
    }
    const std::int64_t rows = t.shape[0];
    if (rows % towers != 0) {
      throw Error(
          fmt::format("the batch of {} examples ('{}', shape {}) does not divide among {} "
                      "towers; use a batch size that is a multiple of {}",
                      rows, name, t.shape.str(), towers, towers));
    }
    std::vector<std::int64_t> dims = t.shape.dims();
    dims[0] = rows / towers;
    const Shape part(dims);
    const std::size_t n = static_cast<std::size_t>(part.elements());
    for (int i = 0; i < towers; ++i) {
      HostTensor s{part, t.dtype, {}, {}};
      if (t.dtype == DType::F32) {
        s.f32.assign(t.f32.begin() + i * n, t.f32.begin() + (i + 1) * n);
      } else {
        s.i32.assign(t.i32.begin() + i * n, t.i32.begin() + (i + 1) * n);
      }
      shards[i][name] = std::move(s);
    }
  }
  return shards;
}

}  // namespace vkt
