// ReplicaSum: the towers' meeting point inside a step.
#include "replica_sum.h"

#include <fmt/format.h>

#include "../runtime/mpi/process_group.h"
#include "../runtime/vulkan/error.h"

namespace vkt {

ReplicaSum::ReplicaSum(int replicas, ProcessGroup* processes)
    : processes_(processes), values_(static_cast<std::size_t>(replicas)) {}

void ReplicaSum::exchange(int replica, std::span<const float> local, std::span<float> sum) {
  std::unique_lock lock(mutex_);
  if (aborted_) throw Error("the step stopped: another tower failed before the towers' sums");
  values_.at(static_cast<std::size_t>(replica)).assign(local.begin(), local.end());
  const std::uint64_t point = generation_;
  if (++waiting_ == static_cast<int>(values_.size())) {
    // Summed in double, in tower order: N towers' moments lose nothing to a
    // float sum's rounding and come out the same every run.
    sum_.assign(local.size(), 0.0);
    for (std::size_t r = 0; r < values_.size(); ++r) {
      if (values_[r].size() != local.size()) {
        aborted_ = true;
        arrived_.notify_all();
        throw Error(
            fmt::format("tower {} gave {} values to a sum of {} across towers; every "
                        "tower must run the same model",
                        r, values_[r].size(), local.size()));
      }
      for (std::size_t e = 0; e < local.size(); ++e) sum_[e] += values_[r][e];
    }
    if (processes_ != nullptr) {
      try {
        processes_->allreduce_sum(std::span<double>(sum_),
                                  "a sum across towers inside the step (synchronized batch norm)");
      } catch (...) {
        aborted_ = true;
        arrived_.notify_all();
        throw;
      }
    }
    waiting_ = 0;
    ++generation_;
    arrived_.notify_all();
  } else {
    arrived_.wait(lock, [&] { return generation_ != point || aborted_; });
    if (generation_ == point) {
      throw Error("the step stopped: another tower failed before the towers' sums");
    }
  }
  // The next point's sum is formed only once every replica has arrived there,
  // so after each has taken this one.
  for (std::size_t e = 0; e < sum.size(); ++e) sum[e] = static_cast<float>(sum_[e]);
}

void ReplicaSum::abort() {
  std::lock_guard lock(mutex_);
  aborted_ = true;
  arrived_.notify_all();
}

void ReplicaSum::reset() {
  std::lock_guard lock(mutex_);
  aborted_ = false;
  waiting_ = 0;
}

}  // namespace vkt
