#pragma once
// The ProcessGroup over an MPI communicator. Internal to runtime/mpi/ and its
// tests (includes <mpi.h>; not installed): applications use vkt::mpi_world().

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "../process_group.h"
#include "mpi_exchange.h"

namespace vkt::detail {

/// How allreduce_sum exchanges a chunk; both sum in rank order.
///   ReduceScatter: the chunk is cut into size() slices and rank j owns slice j.
///     Every rank sends slice j to rank j, which sums the size() copies into its
///     slice; then every rank sends its summed slice to all. Two rounds (a
///     chunk's second travels with the next chunk's first); each rank sends and
///     receives 2 (P-1)/P of the bytes (as a ring allreduce).
///   Direct: every rank sends the chunk to every other and sums all P copies
///     itself. One round; each rank sends (P-1) x the bytes.
///   Automatic: Direct for a chunk of at most kDirectBytes (latency-bound: one
///     round beats two), ReduceScatter otherwise. (Direct moves the same bytes
///     as ReduceScatter for 2 ranks, but measured 3x slower on 1 MiB there:
///     docs/PERFORMANCE.md.)
enum class AllreduceAlgorithm { Automatic, ReduceScatter, Direct };

/// Every collective is point-to-point messages between every pair of ranks
/// (so a timeout names exactly the ranks that did not answer), waited for by
/// MpiExchange against one deadline per collective. allreduce_sum works in
/// chunks of `chunk_bytes`; extra host memory: one chunk (Direct: P-1 chunks).
class MpiProcessGroup final : public ProcessGroup {
 public:
  static constexpr std::size_t kDefaultChunkBytes = std::size_t{4} << 20;
  static constexpr std::size_t kDirectBytes = std::size_t{64} << 10;

  /// Collective over `comm`'s ranks, on a duplicate of it (its messages never
  /// meet the caller's). vkt::Error for a chunk_bytes of 0 or over 1 GiB.
  explicit MpiProcessGroup(MPI_Comm comm, std::size_t chunk_bytes = kDefaultChunkBytes,
                           AllreduceAlgorithm algorithm = AllreduceAlgorithm::Automatic);
  ~MpiProcessGroup() override;
  MpiProcessGroup(const MpiProcessGroup&) = delete;
  MpiProcessGroup& operator=(const MpiProcessGroup&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::size_t chunk_bytes() const { return chunk_bytes_; }
  /// True once a collective failed: every later one throws at once.
  bool broken() const { return !broken_reason_.empty(); }

  void allreduce_sum(std::span<float> data, std::string_view what) override;
  void allreduce_sum(std::span<double> data, std::string_view what) override;
  void allreduce_sum(std::span<std::uint16_t> data, const HalfFormat& format,
                     std::string_view what) override;
  std::uint64_t bytes_sent() const override { return bytes_sent_; }
  void allgather(std::span<const std::byte> mine, std::span<std::byte> all,
                 std::string_view what) override;
  std::vector<std::string> allgather(const std::string& mine, std::string_view what) override;
  void broadcast(std::span<std::byte> data, int root, std::string_view what) override;
  std::string broadcast(const std::string& data, int root, std::string_view what) override;
  std::vector<std::vector<std::byte>> gather(std::span<const std::byte> mine,
                                             std::string_view what) override;

 private:
  // Runs `body` with the collective's deadline; a throw breaks the group.
  void collective(std::string_view what, const std::function<void(CollectiveDeadline&)>& body);
  // `Sum` forms a slice's rank-order sum: sum(inputs in rank order, out, n).
  template <typename T, typename Sum>
  void reduce_scatter(std::span<T> data, std::size_t chunk, const Sum& sum,
                      CollectiveDeadline& deadline);
  template <typename T>
  void post_reduce(MpiExchange& exchange, std::span<T> chunk);
  template <typename T, typename Sum>
  void sum_my_slice(std::span<T> chunk, const Sum& sum);
  template <typename T>
  void post_gather(MpiExchange& exchange, std::span<T> chunk);
  template <typename T, typename Sum>
  void direct_chunk(std::span<T> chunk, const Sum& sum, CollectiveDeadline& deadline);
  bool direct(std::size_t chunk_bytes) const;
  template <typename T, typename Sum>
  void allreduce(std::span<T> data, const Sum& sum, std::string_view what);
  std::vector<std::uint64_t> allgather_sizes(std::uint64_t mine, CollectiveDeadline& deadline);
  void check_root(int root, std::string_view what) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  std::size_t chunk_bytes_;
  AllreduceAlgorithm algorithm_;
  std::vector<double> scratch_;  // the other ranks' copies, one slot per other rank
  std::string broken_reason_;
  std::uint64_t bytes_sent_ = 0;
};

/// Makes the process end the whole MPI job (MPI_Abort) rather than finalise
/// when it exits: a collective failed, so a peer may be waiting forever.
void mark_mpi_job_broken();

}  // namespace vkt::detail
