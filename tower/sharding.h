#pragma once
// Splitting a global batch into one shard per tower.

#include <vector>

#include "../runtime/io/host_tensor.h"

namespace vkt {

/// Splits every entry along dimension 0 into `towers` equal shards, in order.
/// A batch that does not divide is a vkt::Error naming the batch size, the entry
/// and the tower count.
std::vector<HostBatch> shard(const HostBatch& batch, int towers);

}  // namespace vkt
