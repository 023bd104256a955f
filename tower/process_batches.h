#pragma once
// A global batch split among the processes of a job, and joined back.

#include <string>

#include "../runtime/io/host_tensor.h"

namespace vkt {

class ProcessGroup;

/// Rank `rank`'s rows of a global batch of `rows` examples: rows [rank * b,
/// (rank + 1) * b) of every entry, b = rows / size (which must divide: the
/// caller checks, naming the batch).
HostBatch rank_rows(const HostBatch& batch, int rank, int size);

/// Every rank's rows of each entry (every rank has the same entries, dtypes
/// and row shapes), joined in rank order on rank 0, so they line up with the
/// global batch; empty on the other ranks. Collective.
HostBatch gather_rows(ProcessGroup& processes, const HostBatch& mine, const std::string& what);

}  // namespace vkt
