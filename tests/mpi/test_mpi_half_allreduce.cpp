// allreduce_sum of half values: every rank's values widened, summed in f32 in
// rank order and rounded once, the same bits on every rank whichever way the
// chunks travel, at half the bytes of the f32 sum.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include <vktower/runtime/graph/half.h>
#include <vktower/runtime/mpi/detail/mpi_process_group.h>
#include <vktower/runtime/mpi/process_group.h>

#include "mpi_test_support.h"

namespace {

using vkt::detail::AllreduceAlgorithm;
using vkt::detail::MpiProcessGroup;

/// A format and its one-value conversions (half.h's reference).
struct Format {
  vkt::HalfFormat spans;
  float (*widen)(std::uint16_t);
  std::uint16_t (*round)(float);
};
const Format kF16{{"f16", vkt::widen_f16, vkt::round_to_f16}, vkt::f16_to_f32, vkt::f32_to_f16};
const Format kBF16{
    {"bf16", vkt::widen_bf16, vkt::round_to_bf16}, vkt::bf16_to_f32, vkt::f32_to_bf16};

std::vector<std::uint16_t> rounded(const std::vector<float>& values, const Format& f) {
  std::vector<std::uint16_t> out(values.size());
  std::transform(values.begin(), values.end(), out.begin(), f.round);
  return out;
}

/// round(((w_0 + w_1) + w_2) + ...) with w_r rank r's half values widened.
std::vector<std::uint16_t> reference(int ranks, std::size_t n, unsigned seed, const Format& f) {
  std::vector<float> sum(n, 0.0f);
  for (int r = 0; r < ranks; ++r) {
    const std::vector<std::uint16_t> mine = rounded(vkt::test::rank_values<float>(r, n, seed), f);
    for (std::size_t i = 0; i < n; ++i) {
      sum[i] = r == 0 ? f.widen(mine[i]) : sum[i] + f.widen(mine[i]);
    }
  }
  return rounded(sum, f);
}

/// The half sum on `group` against the reference, on every rank.
void check_half_allreduce(vkt::ProcessGroup& group, std::size_t n, unsigned seed, const Format& f) {
  std::vector<std::uint16_t> data =
      rounded(vkt::test::rank_values<float>(group.rank(), n, seed), f);
  group.allreduce_sum(std::span<std::uint16_t>(data), f.spans, "test half allreduce");
  const std::vector<std::uint16_t> expected = reference(group.size(), n, seed, f);
  INFO(f.spans.name << ", rank " << group.rank() << " of " << group.size() << ", " << n
                    << " elements");
  const std::size_t diff = vkt::test::first_bit_difference(
      std::span<const std::uint16_t>(data), std::span<const std::uint16_t>(expected));
  INFO("first difference at " << diff);
  CHECK(diff == n);
}

}  // namespace

TEST_CASE(
    "allreduce_sum of half values is the rank-order f32 sum rounded once, bit for bit on every "
    "rank, chunked",
    "[mpi]") {
  const int ranks = vkt::mpi_world().size();
  for (const Format& f : {kF16, kBF16}) {
    for (AllreduceAlgorithm algorithm :
         {AllreduceAlgorithm::ReduceScatter, AllreduceAlgorithm::Direct,
          AllreduceAlgorithm::Automatic}) {
      // Chunks of 10, 3 and 1 halves: neither divisible by 2 or 3 ranks.
      for (std::size_t chunk_bytes : {std::size_t{20}, std::size_t{6}, std::size_t{2}}) {
        MpiProcessGroup group(MPI_COMM_WORLD, chunk_bytes, algorithm);
        for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t(ranks + 1),
                              std::size_t{11}, std::size_t{1001}}) {
          INFO("algorithm " << static_cast<int>(algorithm) << ", chunk " << chunk_bytes);
          check_half_allreduce(group, n, 13u + static_cast<unsigned>(n), f);
        }
      }
    }
  }
  // The rounding is once, after the f32 sum: with 3 ranks, a half sum rounded
  // after each addition differs somewhere (2 ranks round once either way).
  if (ranks == 3) {
    const std::size_t n = 1001;
    const std::vector<std::uint16_t> once = reference(3, n, 99u, kF16);
    std::vector<std::uint16_t> each = rounded(vkt::test::rank_values<float>(0, n, 99u), kF16);
    for (int r = 1; r < 3; ++r) {
      const std::vector<std::uint16_t> next =
          rounded(vkt::test::rank_values<float>(r, n, 99u), kF16);
      for (std::size_t i = 0; i < n; ++i) {
        each[i] = kF16.round(kF16.widen(each[i]) + kF16.widen(next[i]));
      }
    }
    CHECK(once != each);
    check_half_allreduce(vkt::mpi_world(), n, 99u, kF16);
  }
}

TEST_CASE("allreduce_sum of f16 values overflows to infinity and keeps NaN, on every rank",
          "[mpi]") {
  vkt::ProcessGroup& world = vkt::mpi_world();
  // 40000 is an f16 value; any two of them sum past 65504, the largest.
  std::vector<std::uint16_t> data{kF16.round(40000.0f), kF16.round(-40000.0f),
                                  kF16.round(world.rank() == 0 ? NAN : 1.0f), kF16.round(0.5f)};
  world.allreduce_sum(std::span<std::uint16_t>(data), kF16.spans, "test half overflow");
  CHECK(kF16.widen(data[0]) == std::numeric_limits<float>::infinity());
  CHECK(kF16.widen(data[1]) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(kF16.widen(data[2])));
  CHECK(kF16.widen(data[3]) == 0.5f * static_cast<float>(world.size()));
}

TEST_CASE("allreduce_sum of half values sends half the bytes of the f32 sum, each algorithm",
          "[mpi]") {
  for (AllreduceAlgorithm algorithm :
       {AllreduceAlgorithm::ReduceScatter, AllreduceAlgorithm::Direct}) {
    // Chunks of 1024 elements either way, so that both cut the same slices.
    MpiProcessGroup f32_group(MPI_COMM_WORLD, 4096, algorithm);
    MpiProcessGroup half_group(MPI_COMM_WORLD, 2048, algorithm);
    const std::size_t n = 5000;  // several chunks
    std::vector<float> floats = vkt::test::rank_values<float>(f32_group.rank(), n, 3u);
    std::vector<std::uint16_t> halves = rounded(floats, kBF16);
    const vkt::HalfFormat& bf16 = kBF16.spans;
    f32_group.allreduce_sum(std::span<float>(floats), "test f32 bytes");
    half_group.allreduce_sum(std::span<std::uint16_t>(halves), bf16, "test half bytes");
    const std::uint64_t f32_bytes = f32_group.bytes_sent(), half_bytes = half_group.bytes_sent();
    INFO("algorithm " << static_cast<int>(algorithm) << ": f32 " << f32_bytes << " bytes, half "
                      << half_bytes);
    CHECK(f32_bytes > 0);
    // Every slice the f32 sum sends, the half sum sends at 2 bytes an element.
    CHECK(2 * half_bytes == f32_bytes);
  }
}
