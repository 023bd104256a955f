#include "mpi_exchange.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <thread>

#include "../../vulkan/error.h"

namespace vkt::detail {

namespace {

// The largest single message: MPI counts are int; 1 GiB keeps well inside.
constexpr std::size_t kMaxMessageBytes = std::size_t{1} << 30;
// The wait polls without sleeping for kSpinAfterProgress after a message last
// completed (and after the wait began): a transfer under way keeps its core, as
// MPI's own blocking calls do, since MPI progresses only inside MPI calls and a
// sleeping rank delays its peers too. A peer that is late costs this much
// spinning; then the wait sleeps between polls, from kFirstSleep doubling to
// kLongestSleep, starting again from kFirstSleep whenever a message completed.
constexpr std::chrono::microseconds kSpinAfterProgress{200};
constexpr std::chrono::microseconds kFirstSleep{20};
constexpr std::chrono::microseconds kLongestSleep{1000};

std::string error_string(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) return fmt::format("MPI error {}", rc);
  return std::string(text, static_cast<std::size_t>(length));
}

std::string seconds(std::chrono::milliseconds ms) {
  return fmt::format("{:g} s", static_cast<double>(ms.count()) / 1000.0);
}

}  // namespace

void mpi_check(int rc, std::string_view call, std::string_view what) {
  if (rc != MPI_SUCCESS)
    throw Error(fmt::format("{}: {} failed: {}", what, call, error_string(rc)));
}

MpiExchange::MpiExchange(MPI_Comm comm, CollectiveDeadline& deadline)
    : comm_(comm), deadline_(deadline) {}

MpiExchange::~MpiExchange() {
  if (pending_ > 0) abandon();
}

void MpiExchange::send(std::span<const std::byte> bytes, int peer, int tag) {
  do {
    const std::size_t n = std::min(bytes.size(), kMaxMessageBytes);
    MPI_Request request = MPI_REQUEST_NULL;
    // MPI's C API takes a non-const buffer before MPI 3; Open MPI's is const.
    mpi_check(MPI_Isend(bytes.data(), static_cast<int>(n), MPI_BYTE, peer, tag, comm_, &request),
              "MPI_Isend", deadline_.what);
    requests_.push_back(request);
    messages_.push_back({peer, -1});
    deadline_.sent_bytes += n;
    ++pending_;
    bytes = bytes.subspan(n);
  } while (!bytes.empty());
}

void MpiExchange::receive(std::span<std::byte> bytes, int peer, int tag) {
  do {
    const std::size_t n = std::min(bytes.size(), kMaxMessageBytes);
    MPI_Request request = MPI_REQUEST_NULL;
    mpi_check(MPI_Irecv(bytes.data(), static_cast<int>(n), MPI_BYTE, peer, tag, comm_, &request),
              "MPI_Irecv", deadline_.what);
    requests_.push_back(request);
    messages_.push_back({peer, static_cast<int>(n)});
    ++pending_;
    bytes = bytes.subspan(n);
  } while (!bytes.empty());
}

void MpiExchange::wait() {
  indices_.resize(requests_.size());
  statuses_.resize(requests_.size());
  auto sleep = kFirstSleep;
  auto last_progress = MpiClock::now();
  auto last_poll = last_progress;
  while (pending_ > 0) {
    int done = 0;
    const int rc = MPI_Testsome(static_cast<int>(requests_.size()), requests_.data(), &done,
                                indices_.data(), statuses_.data());
    // Consecutive polls are at most a sleep (1 ms) apart: a longer gap is time
    // this process did not run (stopped, or starved), which says nothing of its
    // peers. It moves the deadline on: a process that wakes from a SIGSTOP must
    // not blame a peer whose message arrived meanwhile, or that waits for it.
    const auto now = MpiClock::now();
    if (const auto gap = now - last_poll; gap > kPauseGap) {
      deadline_.paused += gap;
      deadline_.at += gap;
    }
    last_poll = now;
    if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) mpi_check(rc, "MPI_Testsome", deadline_.what);
    if (done != MPI_UNDEFINED && done > 0) {
      for (int i = 0; i < done; ++i) {
        if (rc == MPI_ERR_IN_STATUS) {
          const MPI_Status& status = statuses_[static_cast<std::size_t>(i)];
          const int peer =
              messages_[static_cast<std::size_t>(indices_[static_cast<std::size_t>(i)])].peer;
          if (status.MPI_ERROR != MPI_SUCCESS && status.MPI_ERROR != MPI_ERR_PENDING) {
            throw Error(fmt::format("{}: the message with rank {} failed: {}; every rank stops",
                                    deadline_.what, peer, error_string(status.MPI_ERROR)));
          }
        }
        complete(indices_[static_cast<std::size_t>(i)], statuses_[static_cast<std::size_t>(i)]);
      }
      sleep = kFirstSleep;
      last_progress = now;
      continue;
    }
    if (now >= deadline_.at) throw_timeout();
    if (now - last_progress < kSpinAfterProgress) continue;
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, kLongestSleep);
  }
  requests_.clear();
  messages_.clear();
}

void MpiExchange::complete(int index, const MPI_Status& status) {
  const Message& message = messages_[static_cast<std::size_t>(index)];
  --pending_;
  if (message.expected_bytes < 0) return;
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  if (count != message.expected_bytes) {
    throw Error(fmt::format(
        "{}: rank {} sent {} bytes where {} were expected: every rank must call the collective "
        "with the same sizes; every rank stops",
        deadline_.what, message.peer, count, message.expected_bytes));
  }
}

void MpiExchange::throw_timeout() const {
  std::set<int> silent;
  for (std::size_t i = 0; i < requests_.size(); ++i) {
    if (requests_[i] != MPI_REQUEST_NULL) silent.insert(messages_[i].peer);
  }
  std::string ranks;
  for (int peer : silent) ranks += fmt::format("{}{}", ranks.empty() ? "" : ", ", peer);
  // A pause is not what the peers are blamed for; saying it explains a wait
  // that took longer than the timeout on the wall clock.
  const std::string paused =
      deadline_.paused > MpiClock::duration::zero()
          ? fmt::format(
                "; this process itself was stopped or not scheduled for {:.1f} s of the "
                "wait, which did not count",
                std::chrono::duration<double>(deadline_.paused).count())
          : std::string();
  throw Error(fmt::format(
      "{}: rank{} {} did not answer within {} (it may have died or hung{}); "
      "every rank stops",
      deadline_.what, silent.size() == 1 ? "" : "s", ranks, seconds(deadline_.timeout), paused));
}

void MpiExchange::abandon() noexcept {
  for (std::size_t i = 0; i < requests_.size(); ++i) {
    if (requests_[i] == MPI_REQUEST_NULL) continue;
    // A late message must not land in a buffer its owner has freed meanwhile.
    if (messages_[i].expected_bytes >= 0) MPI_Cancel(&requests_[i]);
    MPI_Request_free(&requests_[i]);
  }
  pending_ = 0;
}

}  // namespace vkt::detail
