#pragma once
// The towers' sums inside a step (cross_replica_sum), on the host.

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

namespace vkt {

class ProcessGroup;

/// Where the towers' threads meet at each cross_replica_sum of a training
/// step: every tower gives its value, the last to arrive adds them up in tower
/// order (so the sum, and so the step, is the same on every run), and each
/// takes the sum. A tower that fails calls abort(): the others stop waiting
/// and throw, so one failure never hangs the step. With a ProcessGroup, the
/// sum goes on across the processes (each process's towers' sum, added up in
/// rank order), so every tower of the job gets the job's sum.
///
///   vkt::ReplicaSum sums(towers);
///   // on tower i's thread, inside Executor::run via ExecutorOptions::replica_sum:
///   sums.exchange(i, local, sum);
class ReplicaSum {
 public:
  /// `processes`: the job's other processes (not owned), or null.
  explicit ReplicaSum(int replicas, ProcessGroup* processes = nullptr);

  /// Blocks until every replica has given its value for this point; `sum`
  /// then holds the sum over replicas 0, 1, ... in that order. Every replica
  /// must pass values of one size. Throws vkt::Error after abort().
  void exchange(int replica, std::span<const float> local, std::span<float> sum);
  /// Wakes every waiting replica with an error (a tower failed mid-step).
  void abort();
  /// Ready for a new step after an abort.
  void reset();

 private:
  ProcessGroup* processes_;
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::vector<std::vector<float>> values_;  // per replica, this point's
  std::vector<double> sum_;
  int waiting_ = 0;
  std::uint64_t generation_ = 0;  // completed points
  bool aborted_ = false;
};

}  // namespace vkt
