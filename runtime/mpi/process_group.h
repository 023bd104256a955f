#pragma once
// The processes of one training job and the collectives the exchange needs.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace vkt {

/// A 16-bit floating-point format that sums over processes may travel in
/// (f16, bf16): how its values widen to f32 (exactly) and how f32 values
/// round to it, a span at a time (`out` as long as `in`; vkt::widen_f16 and
/// vkt::round_to_f16, say).
struct HalfFormat {
  const char* name;
  void (*widen)(std::span<const std::uint16_t> in, std::span<float> out);
  void (*round)(std::span<const float> in, std::span<std::uint16_t> out);
};

/// The processes of one training job (torch.distributed's process group,
/// Horovod's world): one per host, each with its own towers. Every member is a
/// collective: every rank calls it, in the same order, with the same sizes.
///
/// Deterministic: sums are formed in rank order, (x_0 + x_1) + x_2 + ..., so two
/// runs with the same ranks give the same bits and every rank ends with the same
/// bits (what NCCL and Horovod do not promise).
///
/// Bounded: a collective that has not completed after timeout() (no busy wait
/// meanwhile) throws vkt::Error naming `what` (e.g. "step 12: gradient bucket 0")
/// and the ranks that did not answer. The group is then broken: every later
/// collective throws at once, and the process should end (mpi_world() ends the
/// whole job when the process exits, rather than leave its peers hanging).
///
///   vkt::ProcessGroup& world = vkt::mpi_world();
///   world.allreduce_sum(gradients, "step 3: gradients");  // same bits on every rank
class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// Sums `data` elementwise over the ranks, in rank order, in place. Large
  /// spans are exchanged in chunks, so the extra host memory is a chunk, not a
  /// second copy of `data`. `data` may be mapped device memory.
  virtual void allreduce_sum(std::span<float> data, std::string_view what) = 0;
  virtual void allreduce_sum(std::span<double> data, std::string_view what) = 0;
  /// Sums half values `data` (of `format`) over the ranks, in place: every
  /// rank's values widened, added in f32 in rank order, the sum rounded to
  /// `format` once (an overflow is an infinity), the same bits on every rank
  /// whichever way the chunks travel. Half the bytes of an f32 sum travel, as
  /// with PyTorch DDP's fp16 compression hook (whose sums are half throughout).
  virtual void allreduce_sum(std::span<std::uint16_t> data, const HalfFormat& format,
                             std::string_view what) = 0;
  /// Every rank's `mine` (the same size on every rank) into `all`, in rank
  /// order: `all` holds size() * mine.size() bytes; `mine` may be `all`'s own
  /// slot (rank() * mine.size() bytes in).
  virtual void allgather(std::span<const std::byte> mine, std::span<std::byte> all,
                         std::string_view what) = 0;
  /// Every rank's string (any length), in rank order.
  virtual std::vector<std::string> allgather(const std::string& mine, std::string_view what) = 0;
  /// Rank `root`'s `data` to every rank (the same size on every rank).
  virtual void broadcast(std::span<std::byte> data, int root, std::string_view what) = 0;
  /// Rank `root`'s string (any length) to every rank; the argument is ignored elsewhere.
  virtual std::string broadcast(const std::string& data, int root, std::string_view what) = 0;
  /// Every rank's bytes (any length) on rank 0, in rank order; empty on the others.
  virtual std::vector<std::vector<std::byte>> gather(std::span<const std::byte> mine,
                                                     std::string_view what) = 0;

  /// The bytes this process has sent to the other ranks so far, every
  /// collective's together.
  virtual std::uint64_t bytes_sent() const = 0;

  /// How long a collective may wait for the other ranks (default 60 s).
  std::chrono::milliseconds timeout() const { return timeout_; }
  /// vkt::Error for a timeout below 1 ms.
  void set_timeout(std::chrono::milliseconds timeout);

 protected:
  std::chrono::milliseconds timeout_{60'000};
};

/// True when Open MPI's mpirun started this process (its OMPI_COMM_WORLD_SIZE
/// is set). The samples and the Estimator call it once, at the top, to decide
/// whether to join the MPI world.
bool launched_by_mpirun();
/// True when this build of vktower has MPI (CMake option VKT_WITH_MPI).
bool mpi_available();
/// The MPI world (MPI_COMM_WORLD): MPI is initialised on the first call
/// (MPI_THREAD_SERIALIZED: any thread, one at a time) and finalised when the
/// process exits, or the job aborted if a collective failed. vkt::Error when
/// vktower was built without MPI.
ProcessGroup& mpi_world();

}  // namespace vkt
