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
  bool started = false;                 // train() ran on it: metrics.csv trimmed, layout logged
};

namespace detail {

/// start + steps, refused past the largest global step (it would wrap).
std::uint64_t last_step(std::uint64_t start, std::uint64_t steps);
/// The rows of a batch (the same in every entry; vkt::Error otherwise, or when
/// there are more than a full batch).
std::int64_t rows_of(const HostBatch& features, const HostBatch& labels, std::int64_t batch_size);
/// A short batch filled up to `rows` in place; a full one is left as it is.
void pad(HostBatch& batch, std::int64_t rows);
/// vkt::Error naming `dir` unless a file can be made in it (the model_dir).
void check_writable(const std::string& dir);

}  // namespace detail
}  // namespace vkt
