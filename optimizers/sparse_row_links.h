#pragma once
// The occurrence links that let a lazy sparse update sum each row's gradient
// rows without scanning the indices (internal to optimizers/).

#include <cstdint>

#include "../runtime/graph/tensor.h"

namespace vkt::detail {

/// For sparse-gradient indices [k] into a table of `rows` rows: an i32 tensor
/// whose first 2k words are, per occurrence j, head[j] (the first occurrence
/// of its row) and next[j] (the next occurrence after j, or -1); an index
/// outside [0, rows) gets -1 for both. The rest is the kernels' scratch
/// (shaders/sparse_row_links.comp). The same bits run to run. vkt::Error
/// where the tensor would pass the device's storage-buffer range.
Tensor sparse_row_links(const Tensor& indices, std::int64_t rows);

}  // namespace vkt::detail
