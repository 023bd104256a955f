#pragma once
// In-memory data sets and the batches a training loop consumes.

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "csv.h"
#include "host_tensor.h"

namespace vkt {

/// How Dataset::from_csv makes the label column "y", and what it checks.
struct FromCsvOptions {
  /// "y" as i32 class ids (a label that is not a whole number in the i32
  /// range is a vkt::Error), else f32.
  bool integer_labels = false;
  /// When above 0, the classes the model has: every label must be a whole
  /// number in [0, classes), f32 or i32 alike (10 for digits; 2 for a binary
  /// label, 0 or 1). 0: no check beyond integer_labels'.
  std::int64_t classes = 0;
  /// What errors call the table: the file it was read from.
  std::string source = "the CSV table";
};

/// Examples in memory: named columns (f32 or i32) whose dimension 0 is the
/// example. Operations return new data sets; shuffles and splits are seeded and
/// the same on every machine.
///
///   vkt::Dataset all = vkt::Dataset::from_csv(vkt::read_csv("iris.csv", {.skip_lines = 1}), true);
///   auto [train, test] = all.split(0.2, 42);
class Dataset {
 public:
  Dataset() = default;
  /// Every column must have the same number of examples (vkt::Error otherwise).
  explicit Dataset(HostBatch columns);
  /// Features as "x" [rows, features] f32, the label as "y" [rows] (see
  /// FromCsvOptions). A table without rows or without a feature column, or a
  /// label the options refuse, is a vkt::Error naming options.source and the
  /// label's data row (1-based, counting data rows only: no header, no blank line).
  static Dataset from_csv(const CsvTable& table, const FromCsvOptions& options);
  /// from_csv(table, {.integer_labels = integer_labels}).
  static Dataset from_csv(const CsvTable& table, bool integer_labels);

  std::int64_t size() const { return size_; }
  const HostBatch& columns() const { return columns_; }
  /// Examples [begin, begin + count) of every column.
  HostBatch rows(std::int64_t begin, std::int64_t count) const;

  /// The examples in a seeded random order.
  Dataset shuffled(std::uint64_t seed) const;
  /// (train, test): a seeded random split, test holding round(fraction * size).
  std::pair<Dataset, Dataset> split(double test_fraction, std::uint64_t seed) const;
  /// `fn` applied to every example of f32 column `name` (e.g. standardisation).
  Dataset map(const std::string& name, const std::function<void(std::span<float>)>& fn) const;

 private:
  Dataset gather(const std::vector<std::int64_t>& order) const;

  HostBatch columns_;
  std::int64_t size_ = 0;
};

/// Per-feature standardisation fitted on one data set (the training split)
/// and applied to others: x -> (x - mean) / stddev (stddev 0 is taken as 1).
struct Standardizer {
  std::vector<float> mean;
  std::vector<float> stddev;

  static Standardizer fit(const Dataset& data, const std::string& column);
  void operator()(std::span<float> example) const;
};

/// The batches of a data set, `epochs` times over, each prepared on a
/// background thread while the caller works on the previous one. The last
/// batch of an epoch is short unless `drop_remainder` (training: the shards
/// must divide); with a seed, every epoch is reshuffled (seed + epoch).
///
///   vkt::BatchStream batches(train, 32, true, 10, 7);
///   while (auto batch = batches.next()) model.train_step(...);
class BatchStream {
 public:
  /// `first_batch` batches are skipped (counted over epochs): a resumed
  /// training run starts where the interrupted one stopped.
  BatchStream(Dataset data, std::int64_t batch_size, bool drop_remainder, int epochs = 1,
              std::optional<std::uint64_t> shuffle_seed = std::nullopt,
              std::int64_t first_batch = 0);
  ~BatchStream();
  BatchStream(const BatchStream&) = delete;
  BatchStream& operator=(const BatchStream&) = delete;

  /// The next batch, or nothing when every epoch is done. Rethrows an error of
  /// the background thread.
  std::optional<HostBatch> next();

 private:
  void produce();

  Dataset data_;
  std::int64_t batch_size_;
  bool drop_remainder_;
  int epochs_;
  std::optional<std::uint64_t> seed_;
  std::int64_t first_batch_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<HostBatch> ready_;
  bool finished_ = false;
  bool stopping_ = false;
  std::exception_ptr error_;
  std::thread worker_;
};

}  // namespace vkt
