// The Estimator across processes: every rank decides from rank 0's newest
// checkpoint and step, and trains on its own rows of each global batch.
#include <algorithm>

#include "../runtime/mpi/process_group.h"
#include "estimator.h"
#include "process_batches.h"

namespace vkt {

int Estimator::rank() const {
  return processes_ ? processes_->rank() : 0;
}

std::optional<std::string> Estimator::chief_latest() const {
  std::optional<std::string> latest = chief() ? latest_checkpoint() : std::nullopt;
  if (!processes_) return latest;
  // "" for none: a checkpoint's path is never empty.
  const std::string path =
      processes_->broadcast(latest.value_or(""), 0, "the newest checkpoint of rank 0's model_dir");
  return path.empty() ? std::nullopt : std::optional<std::string>(path);
}

HostBatch Estimator::my_rows(const HostBatch& batch) const {
  return processes_ ? rank_rows(batch, rank(), processes_->size()) : batch;
}

std::int64_t Estimator::my_real_rows(std::int64_t real, std::int64_t batch_size) const {
  if (!processes_) return real;
  const std::int64_t mine = batch_size / processes_->size();
  return std::clamp<std::int64_t>(real - rank() * mine, 0, mine);
}

}  // namespace vkt
