#include "mpi_process_group.h"

#include <fmt/format.h>

#include <cstring>

#include "../../vulkan/error.h"

namespace vkt::detail {

namespace {

constexpr std::size_t kMaxChunkBytes = std::size_t{1} << 30;

std::span<const std::byte> bytes_of(const std::uint64_t& value) {
  return std::as_bytes(std::span<const std::uint64_t>(&value, 1));
}

std::span<std::byte> bytes_of(std::uint64_t& value) {
  return std::as_writable_bytes(std::span<std::uint64_t>(&value, 1));
}

std::span<const std::byte> bytes_of(const std::string& s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

std::span<std::byte> bytes_of(std::string& s) {
  return std::as_writable_bytes(std::span<char>(s.data(), s.size()));
}

// A size a peer sent, as a size_t (only a 32-bit host could fail this).
std::size_t to_size(std::uint64_t value, int peer, std::string_view what) {
  if (value > static_cast<std::uint64_t>(SIZE_MAX)) {
    throw Error(fmt::format("{}: rank {} announced {} bytes, more than this process can hold", what,
                            peer, value));
  }
  return static_cast<std::size_t>(value);
}

}  // namespace

MpiProcessGroup::MpiProcessGroup(MPI_Comm comm, std::size_t chunk_bytes,
                                 AllreduceAlgorithm algorithm)
    : chunk_bytes_(chunk_bytes), algorithm_(algorithm) {
  if (chunk_bytes == 0 || chunk_bytes > kMaxChunkBytes) {
    throw Error(fmt::format("MPI allreduce chunk of {} bytes: give 1 byte to 1 GiB", chunk_bytes));
  }
  constexpr std::string_view what = "MPI process group";
  mpi_check(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup", what);
  // Failures come back as codes (turned into vkt::Error), not as an abort.
  mpi_check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler", what);
  mpi_check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank", what);
  mpi_check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size", what);
}

MpiProcessGroup::~MpiProcessGroup() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  // A broken group's messages may be pending: leave its communicator to the job's end.
  if (!finalized && !broken()) MPI_Comm_free(&comm_);
}

void MpiProcessGroup::collective(std::string_view what,
                                 const std::function<void(CollectiveDeadline&)>& body) {
  if (broken()) {
    throw Error(fmt::format("{}: an earlier collective failed ({}); the MPI job must end", what,
                            broken_reason_));
  }
  // Shared by the collective's exchanges: a pause one of them saw moves the deadline for all.
  CollectiveDeadline deadline{what, MpiClock::now() + timeout(), timeout()};
  try {
    body(deadline);
    bytes_sent_ += deadline.sent_bytes;
  } catch (const std::exception& e) {  // vkt::Error, or std::bad_alloc for a peer's size
    broken_reason_ = e.what();
    mark_mpi_job_broken();
    throw;
  }
}

void MpiProcessGroup::check_root(int root, std::string_view what) const {
  if (root < 0 || root >= size_) {
    throw Error(
        fmt::format("{}: root rank {} is not in the group: give 0 to {}", what, root, size_ - 1));
  }
}

void MpiProcessGroup::allgather(std::span<const std::byte> mine, std::span<std::byte> all,
                                std::string_view what) {
  const std::size_t n = mine.size();
  if (all.size() / static_cast<std::size_t>(size_) != n ||
      all.size() % static_cast<std::size_t>(size_) != 0) {
    throw Error(
        fmt::format("{}: allgather into {} bytes of {} bytes per rank: `all` must hold "
                    "{} ranks x {} bytes",
                    what, all.size(), n, size_, n));
  }
  collective(what, [&](CollectiveDeadline& deadline) {
    std::span<std::byte> slot = all.subspan(static_cast<std::size_t>(rank_) * n, n);
    if (n > 0 && slot.data() != mine.data()) std::memmove(slot.data(), mine.data(), n);
    if (n == 0) return;
    MpiExchange exchange(comm_, deadline);
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_) continue;
      exchange.receive(all.subspan(static_cast<std::size_t>(peer) * n, n), peer, kTagAllgather);
      exchange.send(slot, peer, kTagAllgather);
    }
    exchange.wait();
  });
}

std::vector<std::uint64_t> MpiProcessGroup::allgather_sizes(std::uint64_t mine,
                                                            CollectiveDeadline& deadline) {
  std::vector<std::uint64_t> sizes(static_cast<std::size_t>(size_));
  sizes[static_cast<std::size_t>(rank_)] = mine;
  MpiExchange exchange(comm_, deadline);
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    exchange.receive(bytes_of(sizes[static_cast<std::size_t>(peer)]), peer, kTagSizes);
    exchange.send(bytes_of(sizes[static_cast<std::size_t>(rank_)]), peer, kTagSizes);
  }
  exchange.wait();
  return sizes;
}

std::vector<std::string> MpiProcessGroup::allgather(const std::string& mine,
                                                    std::string_view what) {
  std::vector<std::string> all(static_cast<std::size_t>(size_));
  collective(what, [&](CollectiveDeadline& deadline) {
    const std::vector<std::uint64_t> sizes = allgather_sizes(mine.size(), deadline);
    all[static_cast<std::size_t>(rank_)] = mine;
    MpiExchange exchange(comm_, deadline);
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_) continue;
      std::string& theirs = all[static_cast<std::size_t>(peer)];
      theirs.resize(to_size(sizes[static_cast<std::size_t>(peer)], peer, what));
      if (!theirs.empty()) exchange.receive(bytes_of(theirs), peer, kTagAllgather);
      if (!mine.empty()) exchange.send(bytes_of(mine), peer, kTagAllgather);
    }
    exchange.wait();
  });
  return all;
}

void MpiProcessGroup::broadcast(std::span<std::byte> data, int root, std::string_view what) {
  check_root(root, what);
  collective(what, [&](CollectiveDeadline& deadline) {
    if (data.empty()) return;
    MpiExchange exchange(comm_, deadline);
    if (rank_ == root) {
      for (int peer = 0; peer < size_; ++peer) {
        if (peer != root) exchange.send(data, peer, kTagBroadcast);
      }
    } else {
      exchange.receive(data, root, kTagBroadcast);
    }
    exchange.wait();
  });
}

std::string MpiProcessGroup::broadcast(const std::string& data, int root, std::string_view what) {
  check_root(root, what);
  std::string result;
  collective(what, [&](CollectiveDeadline& deadline) {
    if (rank_ == root) {
      result = data;
      const std::uint64_t size = data.size();
      MpiExchange exchange(comm_, deadline);
      for (int peer = 0; peer < size_; ++peer) {
        if (peer == root) continue;
        exchange.send(bytes_of(size), peer, kTagSizes);
        if (!data.empty()) exchange.send(bytes_of(data), peer, kTagBroadcast);
      }
      exchange.wait();
      return;
    }
    std::uint64_t size = 0;
    {
      MpiExchange exchange(comm_, deadline);
      exchange.receive(bytes_of(size), root, kTagSizes);
      exchange.wait();
    }
    result.resize(to_size(size, root, what));
    if (result.empty()) return;
    MpiExchange exchange(comm_, deadline);
    exchange.receive(bytes_of(result), root, kTagBroadcast);
    exchange.wait();
  });
  return result;
}

std::vector<std::vector<std::byte>> MpiProcessGroup::gather(std::span<const std::byte> mine,
                                                            std::string_view what) {
  std::vector<std::vector<std::byte>> all;
  collective(what, [&](CollectiveDeadline& deadline) {
    const std::uint64_t my_size = mine.size();
    if (rank_ != 0) {
      MpiExchange exchange(comm_, deadline);
      exchange.send(bytes_of(my_size), 0, kTagSizes);
      if (!mine.empty()) exchange.send(mine, 0, kTagGather);
      exchange.wait();
      return;
    }
    std::vector<std::uint64_t> sizes(static_cast<std::size_t>(size_));
    {
      MpiExchange exchange(comm_, deadline);
      for (int peer = 1; peer < size_; ++peer) {
        exchange.receive(bytes_of(sizes[static_cast<std::size_t>(peer)]), peer, kTagSizes);
      }
      exchange.wait();
    }
    all.resize(static_cast<std::size_t>(size_));
    all[0].assign(mine.begin(), mine.end());
    MpiExchange exchange(comm_, deadline);
    for (int peer = 1; peer < size_; ++peer) {
      std::vector<std::byte>& theirs = all[static_cast<std::size_t>(peer)];
      theirs.resize(to_size(sizes[static_cast<std::size_t>(peer)], peer, what));
      if (!theirs.empty()) exchange.receive(theirs, peer, kTagGather);
    }
    exchange.wait();
  });
  return all;
}

}  // namespace vkt::detail
