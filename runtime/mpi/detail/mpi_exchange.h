#pragma once
// The point-to-point messages of one step of a collective, and the bounded
// wait for them. Internal to runtime/mpi/ (includes <mpi.h>; not installed).

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace vkt::detail {

using MpiClock = std::chrono::steady_clock;

/// The `what` of a collective and when it must be done (timeout() after it started).
struct CollectiveDeadline {
  std::string_view what;
  MpiClock::time_point at;
  std::chrono::milliseconds timeout;
};

/// vkt::Error "<what>: <call> failed: <MPI_Error_string>" unless rc is MPI_SUCCESS.
void mpi_check(int rc, std::string_view call, std::string_view what);

/// Tags keep the messages of each kind of collective apart.
enum MpiTag : int {
  kTagReduceSlices = 101,
  kTagGatherSlices = 102,
  kTagAllgather = 103,
  kTagBroadcast = 104,
  kTagGather = 105,
  kTagSizes = 106,
  kTagDirect = 107,
};

/// Non-blocking sends and receives, posted, then waited for together. A span
/// longer than one MPI message may be (counts are int) travels as several.
/// The buffers must stay alive until wait() returns. After a throw, receives
/// still pending are cancelled and every pending request freed (the group is
/// broken then; no MPI call follows but the job's end).
class MpiExchange {
 public:
  MpiExchange(MPI_Comm comm, const CollectiveDeadline& deadline);
  ~MpiExchange();
  MpiExchange(const MpiExchange&) = delete;
  MpiExchange& operator=(const MpiExchange&) = delete;

  void send(std::span<const std::byte> bytes, int peer, int tag);
  /// The peer must send exactly bytes.size() bytes (checked on arrival).
  void receive(std::span<std::byte> bytes, int peer, int tag);
  /// Completes every posted message, polling with a growing sleep (never a busy
  /// wait). vkt::Error naming the peers whose messages are still incomplete at
  /// the deadline, or the MPI error of a failed one.
  void wait();

 private:
  struct Message {
    int peer;
    int expected_bytes;  // receives only; -1 for a send
  };
  void complete(int index, const MPI_Status& status);
  [[noreturn]] void throw_timeout() const;
  void abandon() noexcept;

  MPI_Comm comm_;
  const CollectiveDeadline& deadline_;
  std::vector<MPI_Request> requests_;
  std::vector<Message> messages_;
  std::vector<int> indices_;
  std::vector<MPI_Status> statuses_;
  std::size_t pending_ = 0;
};

}  // namespace vkt::detail
