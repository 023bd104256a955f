#include "process_batches.h"

#include <fmt/format.h>

#include <cstring>

#include "../runtime/mpi/process_group.h"
#include "../runtime/vulkan/error.h"

namespace vkt {

HostBatch rank_rows(const HostBatch& batch, int rank, int size) {
  HostBatch slice;
  for (const auto& [name, t] : batch) {
    const std::int64_t b = t.rows() / size;
    slice[name] = t.slice_rows(rank * b, b);
  }
  return slice;
}

namespace {

template <typename T>
std::span<const std::byte> bytes_of(const std::vector<T>& values) {
  return std::as_bytes(std::span<const T>(values));
}

}  // namespace

HostBatch gather_rows(ProcessGroup& processes, const HostBatch& mine, const std::string& what) {
  HostBatch joined;
  for (const auto& [name, t] : mine) {
    const bool f32 = t.dtype == DType::F32;
    const std::vector<std::vector<std::byte>> parts = processes.gather(
        f32 ? bytes_of(t.f32) : bytes_of(t.i32), fmt::format("{}: '{}'", what, name));
    if (processes.rank() != 0) continue;
    const std::int64_t row = t.rows() > 0 ? t.shape.elements() / t.rows() : 1;
    HostTensor all;  // takes the first part's shape
    for (const std::vector<std::byte>& part : parts) {
      const std::int64_t values = static_cast<std::int64_t>(part.size() / 4);
      if (row == 0 || values % row != 0) {
        throw Error(fmt::format("{}: a rank sent {} values of '{}', not whole rows of {}", what,
                                values, name, row));
      }
      std::vector<std::int64_t> dims = t.shape.dims();
      dims[0] = values / row;
      HostTensor rows;
      rows.shape = Shape(dims);
      rows.dtype = t.dtype;
      if (f32) {
        rows.f32.resize(static_cast<std::size_t>(values));
        std::memcpy(rows.f32.data(), part.data(), part.size());
      } else {
        rows.i32.resize(static_cast<std::size_t>(values));
        std::memcpy(rows.i32.data(), part.data(), part.size());
      }
      all.append_rows(rows);
    }
    joined[name] = std::move(all);
  }
  return joined;
}

}  // namespace vkt
