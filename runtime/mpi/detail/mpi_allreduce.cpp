// allreduce_sum: reduce-scatter then allgather, per chunk, summing in rank order.
#include <algorithm>
#include <cstdint>

#include "mpi_process_group.h"

namespace vkt::detail {

namespace {

// The first element of slice `j` when `n` elements are cut into `parts` slices
// (sizes differ by at most one).
std::size_t slice_begin(std::size_t n, int j, int parts) {
  return n * static_cast<std::size_t>(j) / static_cast<std::size_t>(parts);
}

// out[i] = ((in[0][i] + in[1][i]) + in[2][i]) + ...: rank order, whatever rank
// computes it, so every rank ends with the same bits. `out` may be one of `in`.
// Blocked so that the additions vectorise and `out` is written after all reads.
template <typename T>
void sum_in_rank_order(const std::vector<const T*>& in, T* out, std::size_t n) {
  constexpr std::size_t kBlock = 512;
  T acc[kBlock];
  for (std::size_t begin = 0; begin < n; begin += kBlock) {
    const std::size_t m = std::min(kBlock, n - begin);
    const T* first = in[0] + begin;
    for (std::size_t i = 0; i < m; ++i) acc[i] = first[i];
    for (std::size_t k = 1; k < in.size(); ++k) {
      const T* next = in[k] + begin;
      for (std::size_t i = 0; i < m; ++i) acc[i] += next[i];
    }
    std::copy(acc, acc + m, out + begin);
  }
}

// The half values in[0][i], in[1][i], ... widened, summed in f32 in rank order
// and rounded once: the same bits whichever rank computes them.
void sum_half_in_rank_order(const std::vector<const std::uint16_t*>& in, std::uint16_t* out,
                            std::size_t n, const HalfFormat& format) {
  constexpr std::size_t kBlock = 512;
  float acc[kBlock], next[kBlock];
  for (std::size_t begin = 0; begin < n; begin += kBlock) {
    const std::size_t m = std::min(kBlock, n - begin);
    format.widen({in[0] + begin, m}, {acc, m});
    for (std::size_t k = 1; k < in.size(); ++k) {
      format.widen({in[k] + begin, m}, {next, m});
      for (std::size_t i = 0; i < m; ++i) acc[i] += next[i];
    }
    format.round({acc, m}, {out + begin, m});
  }
}

// The plain sum of floats or doubles.
struct PlainSum {
  template <typename T>
  void operator()(const std::vector<const T*>& in, T* out, std::size_t n) const {
    sum_in_rank_order(in, out, n);
  }
};

// The slot of rank `peer`'s copy in scratch: one per other rank.
std::size_t slot_of(int peer, int rank) {
  return static_cast<std::size_t>(peer < rank ? peer : peer - 1);
}

template <typename T>
std::span<const std::byte> bytes_of(std::span<T> values) {
  return std::as_bytes(values);
}

}  // namespace

bool MpiProcessGroup::direct(std::size_t chunk_bytes) const {
  switch (algorithm_) {
    case AllreduceAlgorithm::Direct:
      return true;
    case AllreduceAlgorithm::ReduceScatter:
      return false;
    case AllreduceAlgorithm::Automatic:
      break;
  }
  return chunk_bytes <= kDirectBytes;
}

template <typename T>
void MpiProcessGroup::post_reduce(MpiExchange& exchange, std::span<T> chunk) {
  const std::size_t n = chunk.size();
  const std::size_t my_begin = slice_begin(n, rank_, size_);
  const std::size_t my_size = slice_begin(n, rank_ + 1, size_) - my_begin;
  T* const scratch = reinterpret_cast<T*>(scratch_.data());
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    const std::size_t begin = slice_begin(n, peer, size_);
    const std::size_t size = slice_begin(n, peer + 1, size_) - begin;
    if (my_size > 0) {
      exchange.receive(
          std::as_writable_bytes(std::span<T>(scratch + slot_of(peer, rank_) * my_size, my_size)),
          peer, kTagReduceSlices);
    }
    if (size > 0) exchange.send(bytes_of(chunk.subspan(begin, size)), peer, kTagReduceSlices);
  }
}

template <typename T, typename Sum>
void MpiProcessGroup::sum_my_slice(std::span<T> chunk, const Sum& sum) {
  const std::size_t n = chunk.size();
  const std::size_t my_begin = slice_begin(n, rank_, size_);
  const std::size_t my_size = slice_begin(n, rank_ + 1, size_) - my_begin;
  if (my_size == 0) return;
  const T* const scratch = reinterpret_cast<const T*>(scratch_.data());
  T* const mine = chunk.data() + my_begin;
  std::vector<const T*> in(static_cast<std::size_t>(size_));
  for (int k = 0; k < size_; ++k) {
    in[static_cast<std::size_t>(k)] = k == rank_ ? mine : scratch + slot_of(k, rank_) * my_size;
  }
  sum(in, mine, my_size);
}

template <typename T>
void MpiProcessGroup::post_gather(MpiExchange& exchange, std::span<T> chunk) {
  const std::size_t n = chunk.size();
  const std::size_t my_begin = slice_begin(n, rank_, size_);
  const std::size_t my_size = slice_begin(n, rank_ + 1, size_) - my_begin;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    const std::size_t begin = slice_begin(n, peer, size_);
    const std::size_t size = slice_begin(n, peer + 1, size_) - begin;
    if (size > 0) {
      exchange.receive(std::as_writable_bytes(chunk.subspan(begin, size)), peer, kTagGatherSlices);
    }
    if (my_size > 0)
      exchange.send(bytes_of(chunk.subspan(my_begin, my_size)), peer, kTagGatherSlices);
  }
}

template <typename T, typename Sum>
void MpiProcessGroup::reduce_scatter(std::span<T> data, std::size_t chunk, const Sum& sum,
                                     CollectiveDeadline& deadline) {
  const auto piece = [&](std::size_t begin) {
    return data.subspan(begin, std::min(chunk, data.size() - begin));
  };
  {
    MpiExchange exchange(comm_, deadline);
    post_reduce(exchange, piece(0));
    exchange.wait();
  }
  // Chunk c's allgather travels with chunk c+1's reduce-scatter: one wait per
  // chunk, not two. Both are in flight while the scratch is free again (chunk
  // c's sum is done) and they touch different chunks of `data`.
  for (std::size_t begin = 0; begin < data.size(); begin += chunk) {
    sum_my_slice(piece(begin), sum);
    MpiExchange exchange(comm_, deadline);
    post_gather(exchange, piece(begin));
    if (begin + chunk < data.size()) post_reduce(exchange, piece(begin + chunk));
    exchange.wait();
  }
}

template <typename T, typename Sum>
void MpiProcessGroup::direct_chunk(std::span<T> chunk, const Sum& sum,
                                   CollectiveDeadline& deadline) {
  const std::size_t n = chunk.size();
  T* const scratch = reinterpret_cast<T*>(scratch_.data());
  {
    MpiExchange exchange(comm_, deadline);
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_) continue;
      exchange.receive(std::as_writable_bytes(std::span<T>(scratch + slot_of(peer, rank_) * n, n)),
                       peer, kTagDirect);
      exchange.send(bytes_of(chunk), peer, kTagDirect);
    }
    exchange.wait();  // the sends too: the sum below overwrites the chunk
  }
  std::vector<const T*> in(static_cast<std::size_t>(size_));
  for (int k = 0; k < size_; ++k) {
    in[static_cast<std::size_t>(k)] = k == rank_ ? chunk.data() : scratch + slot_of(k, rank_) * n;
  }
  sum(in, chunk.data(), n);
}

template <typename T, typename Sum>
void MpiProcessGroup::allreduce(std::span<T> data, const Sum& sum, std::string_view what) {
  collective(what, [&](CollectiveDeadline& deadline) {
    if (data.empty() || size_ == 1) return;
    const std::size_t chunk = std::max<std::size_t>(1, chunk_bytes_ / sizeof(T));
    const std::size_t first = std::min(chunk, data.size());
    const bool whole_chunks = direct(first * sizeof(T));
    // Direct: a slot per other rank of a whole chunk; ReduceScatter: of a slice
    // (at most ceil(chunk / P) elements).
    const auto others = static_cast<std::size_t>(size_ - 1);
    const std::size_t slot =
        whole_chunks ? first : (first + others) / static_cast<std::size_t>(size_);
    const std::size_t scratch_bytes = slot * others * sizeof(T);
    if (scratch_.size() * sizeof(double) < scratch_bytes) {
      scratch_.resize((scratch_bytes + sizeof(double) - 1) / sizeof(double));
    }
    if (!whole_chunks) {
      reduce_scatter(data, chunk, sum, deadline);
      return;
    }
    for (std::size_t begin = 0; begin < data.size(); begin += chunk) {
      direct_chunk(data.subspan(begin, std::min(chunk, data.size() - begin)), sum, deadline);
    }
  });
}

void MpiProcessGroup::allreduce_sum(std::span<float> data, std::string_view what) {
  allreduce(data, PlainSum{}, what);
}

void MpiProcessGroup::allreduce_sum(std::span<double> data, std::string_view what) {
  allreduce(data, PlainSum{}, what);
}

void MpiProcessGroup::allreduce_sum(std::span<std::uint16_t> data, const HalfFormat& format,
                                    std::string_view what) {
  // One rank alone still rounds nothing: its values are already of the format.
  allreduce(
      data,
      [&format](const std::vector<const std::uint16_t*>& in, std::uint16_t* out, std::size_t n) {
        sum_half_in_rank_order(in, out, n, format);
      },
      what);
}

}  // namespace vkt::detail
