#pragma once
// Splitting a global batch into one shard per tower.

#include <cstdint>
#include <vector>

#include "../runtime/io/host_tensor.h"

namespace vkt {

/// Splits every entry along dimension 0 into `towers` equal shards, in order.
/// A batch that does not divide is a vkt::Error naming the batch size, the entry
/// and the tower count.
std::vector<HostBatch> shard(const HostBatch& batch, int towers);

/// Splits every entry along dimension 0 into shards of `rows[i]` rows, in
/// order; the rows must add up to the batch's (vkt::Error naming the entry).
std::vector<HostBatch> shard(const HostBatch& batch, const std::vector<std::int64_t>& rows);

/// Each tower's rows of a batch of `batch` examples shared in proportion to
/// `weights` (ReplicateOptions::shard_weights, one per tower, each finite and
/// above 0): the largest remainders round, ties to the earlier tower, every
/// tower at least one row. vkt::Error, in the sample's words, for weights that
/// are not one per tower or not positive, or a batch smaller than the towers.
std::vector<std::int64_t> weighted_rows(std::int64_t batch, const std::vector<double>& weights);

}  // namespace vkt
