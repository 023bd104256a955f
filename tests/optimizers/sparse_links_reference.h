#pragma once
// What the sparse update's occurrence links (optimizers/sparse_row_links.h)
// should hold, computed on the host by scanning, for the tests to compare.

#include <algorithm>
#include <cstdint>
#include <vector>

namespace vkt::test {

/// head[k] then next[k] of every occurrence of `ids` into a table of `rows`
/// rows: its row's first occurrence and the next one after it (-1: none, and
/// both -1 for an id outside [0, rows)).
inline std::vector<std::int32_t> links_on_host(const std::vector<std::int32_t>& ids,
                                               std::int64_t rows) {
  const std::size_t k = ids.size();
  std::vector<std::int32_t> want(2 * k, -1);
  for (std::size_t j = 0; j < k; ++j) {
    if (ids[j] < 0 || ids[j] >= rows) continue;
    const auto at = [&](auto it) { return static_cast<std::int32_t>(it - ids.begin()); };
    want[j] = at(std::find(ids.begin(), ids.end(), ids[j]));
    const auto after =
        std::find(ids.begin() + static_cast<std::ptrdiff_t>(j) + 1, ids.end(), ids[j]);
    if (after != ids.end()) want[k + j] = at(after);
  }
  return want;
}

}  // namespace vkt::test
