#pragma once
// The point-to-point messages of one step of a collective, and the bounded
// wait for them. Internal to runtime/mpi/ (includes <mpi.h>; not installed).

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace vkt::detail {

using MpiClock = std::chrono::steady_clock;

/// The `what` of a collective and when it must be done: timeout() after it
/// started, not counting the time this process was paused while it waited
/// (stopped by SIGSTOP or Ctrl-Z, or not scheduled at all): its exchanges add
/// such a pause to `paused` and move `at` on by as much, so that a process that
/// was stopped does not wake past the deadline and blame a peer that answered.
struct CollectiveDeadline {
  std::string_view what;
  MpiClock::time_point at;
  std::chrono::milliseconds timeout;
  MpiClock::duration paused{};
  std::uint64_t sent_bytes = 0;  ///< what the collective's exchanges sent
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
  MpiExchange(MPI_Comm comm, CollectiveDeadline& deadline);
  ~MpiExchange();
  MpiExchange(const MpiExchange&) = delete;
  MpiExchange& operator=(const MpiExchange&) = delete;

  void send(std::span<const std::byte> bytes, int peer, int tag);
  /// The peer must send exactly bytes.size() bytes (checked on arrival).
  void receive(std::span<std::byte> bytes, int peer, int tag);
  /// Completes every posted message, polling with a growing sleep (never a busy
  /// wait). vkt::Error naming the peers whose messages are still incomplete at
  /// the deadline, or the MPI error of a failed one. A gap between two polls of
  /// over kPauseGap is time this process did not run: it is added to the
  /// deadline's `paused` rather than counted against it.
  void wait();

  /// Between two polls the wait sleeps at most 1 ms; a gap this long means the
  /// process was stopped or starved, not that a peer was late.
  static constexpr std::chrono::seconds kPauseGap{1};

 private:
  struct Message {
    int peer;
    int expected_bytes;  // receives only; -1 for a send
  };
  void complete(int index, const MPI_Status& status);
  [[noreturn]] void throw_timeout() const;
  void abandon() noexcept;

  MPI_Comm comm_;
  CollectiveDeadline& deadline_;
  std::vector<MPI_Request> requests_;
  std::vector<Message> messages_;
  std::vector<int> indices_;
  std::vector<MPI_Status> statuses_;
  std::size_t pending_ = 0;
};

}  // namespace vkt::detail
