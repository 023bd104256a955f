#include "sharding.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

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

std::vector<HostBatch> shard(const HostBatch& batch, const std::vector<std::int64_t>& rows) {
  std::vector<HostBatch> shards(rows.size());
  for (const auto& [name, t] : batch) {
    std::int64_t total = 0;
    for (const std::int64_t r : rows) total += r;
    if (t.shape.rank() == 0 || t.shape[0] != total) {
      throw Error(
          fmt::format("the batch entry '{}' (shape {}) does not have the {} rows the "
                      "towers' shards add up to",
                      name, t.shape.str(), total));
    }
    const auto row = static_cast<std::size_t>(t.shape.elements() / t.shape[0]);
    std::size_t at = 0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      std::vector<std::int64_t> dims = t.shape.dims();
      dims[0] = rows[i];
      HostTensor s{Shape(dims), t.dtype, {}, {}};
      const std::size_t n = row * static_cast<std::size_t>(rows[i]);
      const auto from = static_cast<std::ptrdiff_t>(at), to = static_cast<std::ptrdiff_t>(at + n);
      if (t.dtype == DType::F32) {
        s.f32.assign(t.f32.begin() + from, t.f32.begin() + to);
      } else {
        s.i32.assign(t.i32.begin() + from, t.i32.begin() + to);
      }
      at += n;
      shards[i][name] = std::move(s);
    }
  }
  return shards;
}

std::vector<std::int64_t> weighted_rows(std::int64_t batch, const std::vector<double>& weights) {
  const auto n = static_cast<std::int64_t>(weights.size());
  double sum = 0;
  for (const double w : weights) {
    if (!std::isfinite(w) || w <= 0) {
      throw Error(
          fmt::format("the shard weights {} must each be a finite number above 0 (one per tower)",
                      fmt::join(weights, ",")));
    }
    sum += w;
  }
  if (batch < n) {
    throw Error(fmt::format(
        "the batch of {} examples cannot give each of {} towers a row; use a batch of at least {}",
        batch, n, n));
  }
  // One row each, then the rest in proportion: the floors first, then a row
  // more to the largest remainders.
  const std::int64_t rest = batch - n;
  std::vector<std::int64_t> rows(weights.size(), 1);
  std::vector<std::pair<double, std::size_t>> remainders;
  std::int64_t given = 0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    const double exact = static_cast<double>(rest) * weights[i] / sum;
    const auto whole = static_cast<std::int64_t>(std::floor(exact));
    rows[i] += whole;
    given += whole;
    remainders.emplace_back(exact - static_cast<double>(whole), i);
  }
  std::stable_sort(remainders.begin(), remainders.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (std::int64_t k = 0; k < rest - given; ++k) {
    ++rows[remainders[static_cast<std::size_t>(k) % remainders.size()].second];
  }
  return rows;
}

}  // namespace vkt
