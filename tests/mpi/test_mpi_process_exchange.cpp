// ProcessExchange on its own (run under mpirun -np 2): a part's sum over the
// processes in place, mapped or staged chunk by chunk, in f32 or in half
// words, which a staged device packs and widens itself.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

#include <vktower/runtime/graph/half.h>
#include <vktower/runtime/mpi/process_group.h>
#include <vktower/runtime/vulkan/buffer.h>
#include <vktower/runtime/vulkan/device.h>
#include <vktower/runtime/vulkan/instance.h>
#include <vktower/tower/half_packing.h>
#include <vktower/tower/process_exchange.h>

#include "mpi_test_support.h"

namespace {

vkt::ProcessGroup& world() {
  return vkt::mpi_world();
}

/// widen(round(widen(round(x_0)) + widen(round(x_1)) + ...)) in rank order:
/// each rank's value rounded, the f32 sum rounded once, widened.
std::vector<float> half_sum_reference(int ranks, std::size_t n, unsigned seed, vkt::DType half) {
  const auto through = [half](float v) {
    return half == vkt::DType::F16 ? vkt::f16_to_f32(vkt::f32_to_f16(v))
                                   : vkt::bf16_to_f32(vkt::f32_to_bf16(v));
  };
  std::vector<float> sum(n, 0.0f);
  for (int r = 0; r < ranks; ++r) {
    const std::vector<float> mine = vkt::test::rank_values<float>(r, n, seed);
    for (std::size_t i = 0; i < n; ++i)
      sum[i] = r == 0 ? through(mine[i]) : sum[i] + through(mine[i]);
  }
  std::transform(sum.begin(), sum.end(), sum.begin(), through);
  return sum;
}

}  // namespace

TEST_CASE("a summed part of no bytes (a bucket of sparse rows alone) is nothing to exchange",
          "[mpi]") {
  vkt::Instance instance;
  for (const bool staged : {false, true}) {
    INFO("staged " << staged);
    vkt::Device device(instance, 0, vkt::DeviceOptions{.force_staging = staged});
    vkt::Buffer buffer(device, 64);
    buffer.upload(std::vector<float>(16, 1.0f));
    vkt::ProcessExchange exchange(world(), {{&buffer, 0, 0}, {&buffer, 16, 32}}, {});
    CHECK(exchange.sum(0, {}, "test").device == nullptr);
    exchange.sum(1, {}, "test").wait();
    const std::vector<float> out = buffer.download<float>();
    CHECK(out == std::vector<float>{1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1});
  }
}

TEST_CASE(
    "a half sum over processes: the same bits whether the host rounds mapped memory or a staged "
    "device packs and widens each chunk, and half the bytes staged",
    "[mpi][half]") {
  vkt::Instance instance;
  constexpr std::size_t kValues = 37, kOffset = 3;  // an odd count, not at the buffer's start
  constexpr unsigned kSeed = 5;
  for (const vkt::DType half : {vkt::DType::F16, vkt::DType::BF16}) {
    const std::vector<float> expected = half_sum_reference(world().size(), kValues, kSeed, half);
    // Chunks of 3 values (odd: each chunk's last word holds one half), 8, and the whole part.
    for (const std::size_t chunk_values : {std::size_t{3}, std::size_t{8}, kValues}) {
      for (const bool staged : {false, true}) {
        INFO(vkt::to_string(half) << ", chunks of " << chunk_values << " values, staged "
                                  << staged);
        vkt::Device device(instance, 0, vkt::DeviceOptions{.force_staging = staged});
        std::vector<float> host(kOffset + kValues + 2, -7.0f);
        const std::vector<float> mine =
            vkt::test::rank_values<float>(world().rank(), kValues, kSeed);
        std::copy(mine.begin(), mine.end(), host.begin() + kOffset);
        vkt::Buffer buffer(device, host.size() * sizeof(float));
        buffer.upload(host);
        const vkt::ProcessExchange::Part part{&buffer, kOffset * sizeof(float),
                                              kValues * sizeof(float)};
        vkt::ProcessExchange exchange(world(), {part}, {}, chunk_values * sizeof(float), half);
        vkt::ProcessExchange f32(world(), {part}, {}, chunk_values * sizeof(float));
        exchange.run({}, "test")[0].wait();
        const std::vector<float> out = buffer.download<float>();
        const std::size_t diff =
            vkt::test::first_bit_difference(std::span<const float>(out).subspan(kOffset, kValues),
                                            std::span<const float>(expected));
        INFO("first difference at " << diff);
        CHECK(diff == kValues);
        CHECK(out[kOffset - 1] == -7.0f);  // nothing else of the buffer written
        CHECK(out[kOffset + kValues] == -7.0f);
        if (!staged) {
          CHECK(exchange.staged_sum_bytes() == 0);
          continue;
        }
        // Down and up, each chunk's half words padded to whole 32-bit words.
        std::size_t words = 0;
        for (std::size_t done = 0; done < kValues; done += chunk_values) {
          words += vkt::packed_bytes(std::min(chunk_values, kValues - done));
        }
        CHECK(exchange.staged_sum_bytes() == 2 * words);
        CHECK(f32.staged_sum_bytes() == 2 * kValues * sizeof(float));
      }
    }
  }
}
