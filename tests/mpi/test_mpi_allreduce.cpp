// allreduce_sum: the rank-order sum, bit for bit, on every rank, across chunks.
#include <mpi.h>

#include <algorithm>
#include <ios>
#include <string>

#include <vktower/runtime/mpi/detail/mpi_process_group.h>
#include <vktower/runtime/mpi/process_group.h>

#include "mpi_test_support.h"

namespace {

using vkt::detail::AllreduceAlgorithm;

// Every rank's result, gathered, is the same bits as the rank-order reference.
template <typename T>
void check_allreduce(vkt::ProcessGroup& group, std::size_t n, unsigned seed) {
  std::vector<T> data = vkt::test::rank_values<T>(group.rank(), n, seed);
  group.allreduce_sum(std::span<T>(data), "test allreduce");
  const std::vector<T> expected = vkt::test::rank_order_sum<T>(group.size(), n, seed);
  INFO("rank " << group.rank() << " of " << group.size() << ", " << n << " elements");
  const std::size_t diff =
      vkt::test::first_bit_difference(std::span<const T>(data), std::span<const T>(expected));
  INFO("first difference at " << diff << ": " << std::hexfloat << (diff < n ? data[diff] : T{})
                              << " vs " << (diff < n ? expected[diff] : T{}));
  CHECK(diff == n);
  // The same bits on every rank: every rank's result on every rank.
  std::vector<std::byte> all(n * sizeof(T) * static_cast<std::size_t>(group.size()));
  group.allgather(std::as_bytes(std::span<const T>(data)), all, "test results");
  // Compared as spans: with n = 0 both data() may be null, which memcmp may not be given.
  const std::span<const std::byte> mine = std::as_bytes(std::span<const T>(data));
  for (int r = 0; r < group.size(); ++r) {
    INFO("rank " << r << "'s result");
    const auto theirs = std::span<const std::byte>(all).subspan(
        static_cast<std::size_t>(r) * n * sizeof(T), n * sizeof(T));
    CHECK(std::equal(theirs.begin(), theirs.end(), mine.begin(), mine.end()));
  }
}

}  // namespace

constexpr AllreduceAlgorithm kAlgorithms[] = {
    AllreduceAlgorithm::ReduceScatter, AllreduceAlgorithm::Direct, AllreduceAlgorithm::Automatic};

TEST_CASE("allreduce_sum of floats is the rank-order sum bit for bit on every rank, chunked",
          "[mpi]") {
  const int ranks = vkt::mpi_world().size();
  // Chunks of 40 bytes (10 floats) and 28 bytes (7 floats): neither divisible by
  // 2 or 3 ranks, and far smaller than most of the data.
  for (AllreduceAlgorithm algorithm : kAlgorithms) {
    for (std::size_t chunk_bytes : {std::size_t{40}, std::size_t{28}, std::size_t{4}}) {
      vkt::detail::MpiProcessGroup group(MPI_COMM_WORLD, chunk_bytes, algorithm);
      for (std::size_t n :
           {std::size_t{0}, std::size_t{1}, std::size_t(ranks - 1), std::size_t(ranks + 1),
            std::size_t{10}, std::size_t{11}, std::size_t{1001}}) {
        INFO("algorithm " << static_cast<int>(algorithm) << ", chunk " << chunk_bytes << " bytes");
        check_allreduce<float>(group, n, 7u + static_cast<unsigned>(n));
      }
    }
  }
}

TEST_CASE("allreduce_sum of doubles is the rank-order sum bit for bit on every rank, chunked",
          "[mpi]") {
  for (AllreduceAlgorithm algorithm : kAlgorithms) {
    for (std::size_t chunk_bytes : {std::size_t{72}, std::size_t{8}, std::size_t{20}}) {
      vkt::detail::MpiProcessGroup group(MPI_COMM_WORLD, chunk_bytes, algorithm);
      for (std::size_t n :
           {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{17}, std::size_t{500}}) {
        INFO("algorithm " << static_cast<int>(algorithm) << ", chunk " << chunk_bytes << " bytes");
        check_allreduce<double>(group, n, 11u + static_cast<unsigned>(n));
      }
    }
  }
}

TEST_CASE("allreduce_sum over several large chunks, each algorithm", "[mpi]") {
  // Chunks at kDirectBytes and past it (Automatic picks one of each).
  for (AllreduceAlgorithm algorithm : kAlgorithms) {
    for (std::size_t chunk_bytes : {std::size_t{64} << 10, std::size_t{100} << 10}) {
      vkt::detail::MpiProcessGroup group(MPI_COMM_WORLD, chunk_bytes, algorithm);
      INFO("algorithm " << static_cast<int>(algorithm) << ", chunk " << chunk_bytes << " bytes");
      check_allreduce<float>(group, chunk_bytes / sizeof(float) * 5 / 2 + 1, 5u);
    }
  }
}

TEST_CASE("allreduce_sum with the default chunk over several chunks", "[mpi]") {
  vkt::ProcessGroup& world = vkt::mpi_world();
  // 2.5 default chunks of floats: two full chunks and a partial one.
  const std::size_t n =
      vkt::detail::MpiProcessGroup::kDefaultChunkBytes / sizeof(float) * 5 / 2 + 3;
  check_allreduce<float>(world, n, 3u);
}

TEST_CASE("allreduce_sum adds in rank order: another order gives other bits", "[mpi]") {
  vkt::ProcessGroup& world = vkt::mpi_world();
  // Per element, x_0, x_1, x_2 (ranks past 2 add 0): in float, 1e8 + 1 rounds to
  // 1e8, so each element's sum depends on which two values meet first. Every
  // order other than (x_0 + x_1) + x_2 gets at least one element wrong.
  const float big = 1e8f;
  const float rows[3][3] = {{big, -big, 1.0f}, {1.0f, big, -big}, {big, 1.0f, -big}};
  std::vector<float> data(3, 0.0f);
  for (std::size_t i = 0; i < 3; ++i) {
    if (world.rank() < 3) data[i] = rows[i][world.rank()];
  }
  // The reference and the alternatives, for 3 ranks (2 ranks: x_0 + x_1, any order).
  std::vector<float> expected(3);
  for (std::size_t i = 0; i < 3; ++i) {
    const float x0 = rows[i][0], x1 = rows[i][1], x2 = world.size() > 2 ? rows[i][2] : 0.0f;
    expected[i] = (x0 + x1) + x2;
  }
  if (world.size() == 3) {
    CHECK(expected == std::vector<float>{1.0f, 0.0f, 0.0f});
    // (x_0 + x_2) + x_1 and (x_1 + x_2) + x_0 each differ from it somewhere.
    CHECK(std::vector<float>{(big + 1.0f) - big, (1.0f - big) + big, (big - big) + 1.0f} !=
          expected);
    CHECK(std::vector<float>{(-big + 1.0f) + big, (big - big) + 1.0f, (1.0f - big) + big} !=
          expected);
  }
  vkt::detail::MpiProcessGroup one_per_chunk(MPI_COMM_WORLD, sizeof(float));
  vkt::detail::MpiProcessGroup scattered(MPI_COMM_WORLD, 64, AllreduceAlgorithm::ReduceScatter);
  for (vkt::ProcessGroup* group :
       {static_cast<vkt::ProcessGroup*>(&world), static_cast<vkt::ProcessGroup*>(&one_per_chunk),
        static_cast<vkt::ProcessGroup*>(&scattered)}) {
    std::vector<float> sum = data;
    group->allreduce_sum(std::span<float>(sum), "rank order");
    CHECK(sum == expected);
  }
}
