#include "dataset.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string_view>

#include "../vulkan/error.h"

namespace vkt {
namespace {

/// A seeded permutation of 0..n-1 (Fisher-Yates with splitmix64): portable,
/// unlike std::shuffle with a standard distribution.
std::vector<std::int64_t> permutation(std::int64_t n, std::uint64_t seed) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::uint64_t state = seed;
  for (std::int64_t i = n - 1; i > 0; --i) {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    std::swap(order[static_cast<std::size_t>(i)],
              order[static_cast<std::size_t>(z % static_cast<std::uint64_t>(i + 1))]);
  }
  return order;
}

std::int64_t example_elements(const HostTensor& t) {
  return t.shape[0] == 0 ? 0 : t.shape.elements() / t.shape[0];
}

}  // namespace

Dataset::Dataset(HostBatch columns) : columns_(std::move(columns)) {
  bool first = true;
  for (const auto& [name, t] : columns_) {
    if (t.shape.rank() == 0) {
      throw Error(
          fmt::format("data set column '{}' is a scalar; columns need an example "
                      "dimension 0",
                      name));
    }
    if (first) size_ = t.shape[0];
    if (t.shape[0] != size_) {
      throw Error(fmt::format("data set columns differ in length: '{}' has {} examples, others {}",
                              name, t.shape[0], size_));
    }
    first = false;
  }
}

Dataset Dataset::from_csv(const CsvTable& table, bool integer_labels) {
  return from_csv(table, FromCsvOptions{.integer_labels = integer_labels});
}

Dataset Dataset::from_csv(const CsvTable& table, const FromCsvOptions& options) {
  const std::string& source = options.source;
  if (table.features < 1) {
    throw Error(fmt::format(
        "{} has {} column{} per row; a data set needs at least one feature column and a label "
        "column",
        source, table.features + 1, table.features == 0 ? "" : "s"));
  }
  if (table.rows < 1) throw Error(fmt::format("{} has no data rows", source));
  if (table.y.size() != static_cast<std::size_t>(table.rows) ||
      table.x.size() / static_cast<std::size_t>(table.features) !=
          static_cast<std::size_t>(table.rows) ||
      table.x.size() % static_cast<std::size_t>(table.features) != 0) {
    throw Error(fmt::format("{}: {} rows of {} features, but {} feature values and {} labels",
                            source, table.rows, table.features, table.x.size(), table.y.size()));
  }
  // Compared as doubles before any cast: a float beyond int's range (1e10,
  // inf) cast to int is undefined behaviour.
  const auto bad_label = [&](std::size_t i, std::string_view why) {
    return Error(fmt::format("{}: data row {}: label {} {}", source, i + 1, table.y[i], why));
  };
  const bool whole = options.integer_labels || options.classes > 0;
  for (std::size_t i = 0; i < table.y.size() && whole; ++i) {
    const double v = table.y[i];
    if (options.classes > 0 &&
        !(v >= 0 && v < static_cast<double>(options.classes) && v == std::floor(v))) {
      throw bad_label(i, fmt::format("is not a class: the model has {} classes, labels 0..{}",
                                     options.classes, options.classes - 1));
    }
    if (!(v == std::floor(v) && v >= std::numeric_limits<std::int32_t>::min() &&
          v <= std::numeric_limits<std::int32_t>::max())) {
      throw bad_label(i, "is not a class id: a whole number in the i32 range");
    }
  }
  HostBatch columns;
  columns["x"] = HostTensor::floats({table.rows, table.features}, table.x);
  if (options.integer_labels) {
    std::vector<std::int32_t> y(table.y.size());
    std::transform(table.y.begin(), table.y.end(), y.begin(),
                   [](float v) { return static_cast<std::int32_t>(v); });
    columns["y"] = HostTensor::ints({table.rows}, std::move(y));
  } else {
    columns["y"] = HostTensor::floats({table.rows}, table.y);
  }
  return Dataset(std::move(columns));
}

HostBatch Dataset::rows(std::int64_t begin, std::int64_t count) const {
  if (begin < 0 || count < 0 || begin + count > size_) {
    throw Error(fmt::format("rows [{}, {}) lie outside a data set of {} examples", begin,
                            begin + count, size_));
  }
  HostBatch out;
  for (const auto& [name, t] : columns_) {
    const std::int64_t each = example_elements(t);
    std::vector<std::int64_t> dims = t.shape.dims();
    dims[0] = count;
    HostTensor part{Shape(dims), t.dtype, {}, {}};
    const auto from = static_cast<std::size_t>(begin * each);
    const auto to = static_cast<std::size_t>((begin + count) * each);
    if (t.dtype == DType::F32) {
      part.f32.assign(t.f32.begin() + static_cast<std::ptrdiff_t>(from),
                      t.f32.begin() + static_cast<std::ptrdiff_t>(to));
    } else {
      part.i32.assign(t.i32.begin() + static_cast<std::ptrdiff_t>(from),
                      t.i32.begin() + static_cast<std::ptrdiff_t>(to));
    }
    out[name] = std::move(part);
  }
  return out;
}

Dataset Dataset::gather(const std::vector<std::int64_t>& order) const {
  HostBatch out;
  for (const auto& [name, t] : columns_) {
    const auto each = static_cast<std::size_t>(example_elements(t));
    std::vector<std::int64_t> dims = t.shape.dims();
    dims[0] = static_cast<std::int64_t>(order.size());
    HostTensor g{Shape(dims), t.dtype, {}, {}};
    for (std::int64_t i : order) {
      const auto at = static_cast<std::size_t>(i) * each;
      if (t.dtype == DType::F32) {
        g.f32.insert(g.f32.end(), t.f32.begin() + static_cast<std::ptrdiff_t>(at),
                     t.f32.begin() + static_cast<std::ptrdiff_t>(at + each));
      } else {
        g.i32.insert(g.i32.end(), t.i32.begin() + static_cast<std::ptrdiff_t>(at),
                     t.i32.begin() + static_cast<std::ptrdiff_t>(at + each));
      }
    }
    out[name] = std::move(g);
  }
  return Dataset(std::move(out));
}

Dataset Dataset::shuffled(std::uint64_t seed) const {
  return gather(permutation(size_, seed));
}

std::pair<Dataset, Dataset> Dataset::split(double test_fraction, std::uint64_t seed) const {
  if (!(test_fraction > 0.0 && test_fraction < 1.0)) {
    throw Error(
        fmt::format("split: the test fraction must be between 0 and 1, not {}", test_fraction));
  }
  const std::vector<std::int64_t> order = permutation(size_, seed);
  const auto test =
      static_cast<std::int64_t>(std::llround(test_fraction * static_cast<double>(size_)));
  const std::vector<std::int64_t> train_rows(order.begin() + test, order.end());
  const std::vector<std::int64_t> test_rows(order.begin(), order.begin() + test);
  return {gather(train_rows), gather(test_rows)};
}

Dataset Dataset::map(const std::string& name,
                     const std::function<void(std::span<float>)>& fn) const {
  auto found = columns_.find(name);
  if (found == columns_.end() || found->second.dtype != DType::F32) {
    throw Error(fmt::format("map: the data set has no f32 column named '{}'", name));
  }
  HostBatch out = columns_;
  HostTensor& t = out[name];
  const auto each = static_cast<std::size_t>(example_elements(t));
  for (std::size_t i = 0; i + each <= t.f32.size() && each > 0; i += each) {
    fn(std::span<float>(t.f32.data() + i, each));
  }
  return Dataset(std::move(out));
}

Standardizer Standardizer::fit(const Dataset& data, const std::string& column) {
  auto found = data.columns().find(column);
  if (found == data.columns().end() || found->second.dtype != DType::F32 || data.size() == 0) {
    throw Error(fmt::format("Standardizer: no non-empty f32 column named '{}'", column));
  }
  const HostTensor& t = found->second;
  const std::size_t each = static_cast<std::size_t>(example_elements(t));
  std::vector<double> sum(each, 0.0), sum2(each, 0.0);
  for (std::size_t i = 0; i < t.f32.size(); ++i) {
    sum[i % each] += t.f32[i];
    sum2[i % each] += static_cast<double>(t.f32[i]) * t.f32[i];
  }
  Standardizer s;
  const double n = static_cast<double>(data.size());
  for (std::size_t j = 0; j < each; ++j) {
    const double mean = sum[j] / n;
    const double var = std::max(0.0, sum2[j] / n - mean * mean);
    s.mean.push_back(static_cast<float>(mean));
    s.stddev.push_back(var > 0 ? static_cast<float>(std::sqrt(var)) : 1.0f);
  }
  return s;
}

void Standardizer::operator()(std::span<float> example) const {
  for (std::size_t j = 0; j < example.size() && j < mean.size(); ++j) {
    example[j] = (example[j] - mean[j]) / stddev[j];
  }
}

BatchStream::BatchStream(Dataset data, std::int64_t batch_size, bool drop_remainder, int epochs,
                         std::optional<std::uint64_t> shuffle_seed, std::int64_t first_batch)
    : data_(std::move(data)),
      batch_size_(batch_size),
      drop_remainder_(drop_remainder),
      epochs_(epochs),
      seed_(shuffle_seed),
      first_batch_(first_batch) {
  if (batch_size_ < 1 || epochs_ < 1 || first_batch_ < 0) {
    throw Error(fmt::format(
        "BatchStream: batch size ({}) and epochs ({}) must be at least 1, and the first batch "
        "({}) not negative",
        batch_size_, epochs_, first_batch_));
  }
  if (drop_remainder_ && data_.size() < batch_size_) {
    throw Error(fmt::format(
        "BatchStream: {} examples make no full batch of {} (drop_remainder drops them all); "
        "use a smaller batch",
        data_.size(), batch_size_));
  }
  worker_ = std::thread([this] { produce(); });
}

BatchStream::~BatchStream() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  worker_.join();
}

void BatchStream::produce() {
  try {
    const std::int64_t per_epoch = drop_remainder_ ? data_.size() / batch_size_
                                                   : (data_.size() + batch_size_ - 1) / batch_size_;
    const std::int64_t first_epoch = per_epoch == 0 ? 0 : first_batch_ / per_epoch;
    for (std::int64_t epoch = first_epoch; epoch < epochs_; ++epoch) {
      const Dataset order =
          seed_ ? data_.shuffled(*seed_ + static_cast<std::uint64_t>(epoch)) : data_;
      const std::int64_t first =
          epoch == first_epoch && per_epoch > 0 ? first_batch_ % per_epoch * batch_size_ : 0;
      for (std::int64_t begin = first; begin < order.size(); begin += batch_size_) {
        const std::int64_t count = std::min(batch_size_, order.size() - begin);
        if (count < batch_size_ && drop_remainder_) break;
        HostBatch batch = order.rows(begin, count);
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [this] { return !ready_ || stopping_; });
        if (stopping_) return;
        ready_ = std::move(batch);
        changed_.notify_all();
      }
    }
  } catch (...) {
    std::lock_guard lock(mutex_);
    error_ = std::current_exception();
  }
  std::lock_guard lock(mutex_);
  finished_ = true;
  changed_.notify_all();
}

std::optional<HostBatch> BatchStream::next() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return ready_ || finished_; });
  if (ready_) {
    std::optional<HostBatch> out = std::move(ready_);
    ready_.reset();
    changed_.notify_all();
    return out;
  }
  if (error_) std::rethrow_exception(error_);
  return std::nullopt;
}

}  // namespace vkt
