#pragma once
// A sum over the replicas of a model inside one step.

#include "../tensor.h"

namespace vkt {

/// The sum of `x` over every replica of the model (every tower, in tower
/// order), taken inside the step: the Executor hands x to the host between two
/// segments of the step and copies the sum back (ExecutorOptions::replica_sum;
/// TowerRun sums its towers'). Alone, a graph is its only replica and this is
/// x. Its gradient is the sum of the replicas' gradients, as the sum reaches
/// every replica's loss. Synchronized batch norm exchanges its batch moments
/// this way (PyTorch's SyncBatchNorm all-reduce).
///
///   vkt::Tensor global_sums = vkt::cross_replica_sum(local_sums);   // [2, C]
Tensor cross_replica_sum(const Tensor& x);

}  // namespace vkt
