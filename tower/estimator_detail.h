#pragma once
// The Estimator's internals shared by its files (estimator.cpp, estimator_train.cpp).

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "estimator.h"
#include "tower_run.h"

namespace vkt {

/// A mode's model, built for one batch shape.
struct Estimator::Built {
  std::int64_t batch_size = 0;
  std::map<std::string, InputSpec> features, labels;
  std::shared_ptr<TowerRun> run;
  std::vector<std::shared_ptr<TrainingHook>> hooks;
  std::optional<std::string> restored;  // the checkpoint the variables hold, if any
  bool warm_started = false;            // RunConfig::warm_start_from was applied
};

namespace detail {

/// start + steps, refused past the largest global step (it would wrap).
inline std::uint64_t last_step(std::uint64_t start, std::uint64_t steps) {
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  if (steps > kMax - start) {
    throw Error(fmt::format(
        "train: steps {} from global step {} would pass the largest global step {}; give 1 to "
        "{} steps",
        steps, start, kMax, kMax - start));
  }
  return start + steps;
}

/// The rows of a batch (the same in every entry; vkt::Error otherwise, or when
/// there are more than a full batch).
inline std::int64_t rows_of(const HostBatch& features, const HostBatch& labels,
                            std::int64_t batch_size) {
  std::int64_t rows = -1;
  for (const HostBatch* part : {&features, &labels}) {
    for (const auto& [name, t] : *part) {
      if (rows >= 0 && t.rows() != rows) {
        throw Error(fmt::format(
            "the input gave a batch whose entries disagree on the number of examples ('{}' has "
            "{}, another {})",
            name, t.rows(), rows));
      }
      rows = t.rows();
    }
  }
  if (rows < 1 || rows > batch_size) {
    throw Error(fmt::format("the input gave a batch of {} examples; its batch_size() is {}", rows,
                            batch_size));
  }
  return rows;
}

/// A short batch filled up to `rows` in place; a full one is left as it is.
inline void pad(HostBatch& batch, std::int64_t rows) {
  for (auto& [name, t] : batch) {
    if (t.rows() < rows) t = t.padded_rows(rows);
  }
}

/// vkt::Error naming `dir` unless a file can be made in it (the model_dir).
void check_writable(const std::string& dir);

}  // namespace detail
}  // namespace vkt
