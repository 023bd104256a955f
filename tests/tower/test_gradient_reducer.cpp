#include <catch2/catch.hpp>

#include <bit>
#include <memory>

#include <vktower/runtime/graph/half.h>
#include <vktower/runtime/vulkan/buffer.h>
#include <vktower/runtime/vulkan/device.h>
#include <vktower/runtime/vulkan/instance.h>
#include <vktower/tower/gradient_reducer.h>

#include "../test_support.h"

using Catch::Matchers::Contains;

namespace {

/// One Device per tower on device 0; `staged`: a discrete GPU's path
/// (staging buffers and copy commands).
std::vector<std::unique_ptr<vkt::Device>> tower_devices(vkt::Instance& instance, int towers,
                                                        bool staged) {
  std::vector<std::unique_ptr<vkt::Device>> devices;
  for (int t = 0; t < towers; ++t) {
    devices.push_back(
        std::make_unique<vkt::Device>(instance, 0, vkt::DeviceOptions{.force_staging = staged}));
  }
  return devices;
}

}  // namespace

TEST_CASE("the gradient reducer sums every tower's arena in tower order, bit for bit") {
  const int towers = GENERATE(1, 2, 3, 4);
  const bool staged = GENERATE(false, true);  // a discrete GPU's path: staging and copy commands
  INFO(towers << " towers, staged " << staged);
  vkt::Instance instance;
  const auto devices = tower_devices(instance, towers, staged);
  vkt::Device consolidation(instance, 0, vkt::DeviceOptions{.force_staging = staged});
  const std::size_t n = 10003;  // not a multiple of 4
  std::vector<std::vector<float>> host;
  std::vector<vkt::Buffer> arenas;
  std::vector<vkt::BufferRange> ranges;
  for (int t = 0; t < towers; ++t) {
    host.push_back(vkt::test::random_floats(n, 100 + t, -1000.0f, 1000.0f));
    arenas.emplace_back(*devices[t], n * sizeof(float) + 64);
  }
  for (int t = 0; t < towers; ++t) {
    arenas[t].upload(host[t], 32);  // the gradients sit at an offset inside a bigger arena
    ranges.emplace_back(arenas[t], 32, n * sizeof(float));
  }
  vkt::GradientReducer reducer(ranges, consolidation);
  CHECK(reducer.towers() == static_cast<std::size_t>(towers));
  for (int round = 0; round < 2; ++round) {  // built once, run again
    reducer.run({}).wait();
    std::vector<float> sum(n);
    reducer.sum().buffer->download(std::as_writable_bytes(std::span<float>(sum)),
                                   reducer.sum().offset);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i) {
      float expected = host[0][i];
      for (int t = 1; t < towers; ++t) expected += host[t][i];  // tower order, float
      wrong += sum[i] != expected;
    }
    CHECK(wrong == 0);
    for (int t = 0; t < towers; ++t) {
      for (float& v : host[t]) v *= 0.5f;
      arenas[t].upload(host[t], 32);
    }
  }
}

TEST_CASE("the gradient reducer refuses towers of different sizes") {
  vkt::Instance instance;
  vkt::Device a(instance, 0), b(instance, 0);
  vkt::Buffer ga(a, 64), gb(b, 128);
  CHECK_THAT(vkt::test::error_of([&] {
               vkt::GradientReducer r({ga, gb}, a);
             }),
             Contains("tower 1 has 128 bytes of gradients but tower 0 has 64"));
  CHECK_THAT(vkt::test::error_of([&] { vkt::GradientReducer r({}, a); }), Contains("no tower"));
}

TEST_CASE(
    "the gradient reducer accumulates: dest + g_0 + g_1 + ..., bit for bit, and overwrites "
    "again when told") {
  const int towers = GENERATE(1, 3);
  const bool staged = GENERATE(false, true);
  INFO(towers << " towers, staged " << staged);
  vkt::Instance instance;
  const auto devices = tower_devices(instance, towers, staged);
  vkt::Device consolidation(instance, 0, vkt::DeviceOptions{.force_staging = staged});
  const std::size_t n = 1001;
  std::vector<vkt::Buffer> arenas;
  std::vector<vkt::BufferRange> ranges;
  for (int t = 0; t < towers; ++t) arenas.emplace_back(*devices[t], n * sizeof(float));
  for (int t = 0; t < towers; ++t) ranges.emplace_back(arenas[t]);  // the buffers stay put now
  vkt::GradientReducer reducer(ranges, consolidation);
  std::vector<float> expected(n, 0.0f);
  // Micro-batches: overwrite, accumulate, accumulate, then a new step overwrites.
  for (const bool accumulate : {false, true, true, false, true}) {
    std::vector<std::vector<float>> host;
    for (int t = 0; t < towers; ++t) {
      host.push_back(vkt::test::random_floats(n, 7 * t + (accumulate ? 1 : 2), -100.0f, 100.0f));
      arenas[t].upload(host[t]);
    }
    reducer.set_accumulate(accumulate);
    CHECK(reducer.accumulates() == accumulate);
    reducer.run({}).wait();
    for (std::size_t i = 0; i < n; ++i) {
      float sum = accumulate ? expected[i] + host[0][i] : host[0][i];  // left to right, float
      for (int t = 1; t < towers; ++t) sum += host[t][i];
      expected[i] = sum;
    }
    std::vector<float> got(n);
    reducer.sum().buffer->download(std::as_writable_bytes(std::span<float>(got)),
                                   reducer.sum().offset);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i) wrong += got[i] != expected[i];
    CHECK(wrong == 0);
  }
  // The mode changes between steps only: not with a bucket part-way handed over.
  if (towers > 1) {
    reducer.arrive(0, 0, {});
    CHECK_THAT(vkt::test::error_of([&] { reducer.set_accumulate(false); }),
               Contains("bucket 0 is part-way through a step (1 of 3 towers)"));
    reducer.abandon();
    reducer.set_accumulate(false);
  }
}

TEST_CASE(
    "the gradient reducer's half exchange: each tower's gradients rounded to f16 or bf16 on its "
    "device, summed in f32 in tower order, bit for bit, in windows and buckets, accumulating") {
  const int towers = GENERATE(1, 3);
  const bool staged = GENERATE(false, true);
  const vkt::DType half = GENERATE(vkt::DType::F16, vkt::DType::BF16);
  INFO(towers << " towers, staged " << staged << ", " << vkt::to_string(half));
  vkt::Instance instance;
  const auto devices = tower_devices(instance, towers, staged);
  vkt::Device consolidation(instance, 0, vkt::DeviceOptions{.force_staging = staged});
  // Two gradients (odd counts, the second at an offset) in two buckets, and
  // windows of 1 KiB: pieces split mid-gradient, runs packed one by one.
  const std::size_t n0 = 1001, n1 = 333, offset1 = 4096 + 32;
  const std::size_t dest_bytes = (offset1 + n1 * 4 + 15) / 16 * 16;
  std::vector<vkt::Buffer> arenas;
  arenas.reserve(static_cast<std::size_t>(towers));  // the segments point at them
  std::vector<std::vector<vkt::GradientReducer::Segment>> segments;
  for (int t = 0; t < towers; ++t) {
    arenas.emplace_back(*devices[t], 8192);
    segments.push_back({{vkt::BufferRange(arenas.back(), 32, n0 * 4), 0, 0},
                        {vkt::BufferRange(arenas.back(), 4100, n1 * 4), offset1, 1}});
  }
  vkt::Buffer destination(consolidation, dest_bytes);
  vkt::GradientReducer reducer(segments, vkt::BufferRange(destination), 1024 * towers, half);
  std::vector<float> expected(dest_bytes / 4, 0.0f);
  for (const bool accumulate : {false, true}) {
    std::vector<std::vector<float>> host;
    for (int t = 0; t < towers; ++t) {
      host.push_back(vkt::test::random_floats(n0 + n1, 11 * t + accumulate, -1000.0f, 1000.0f));
      host.back()[5] = 1e6f;  // past f16's range: infinity there, finite in bf16
      arenas[t].upload(std::span<const float>(host.back()).first(n0), 32);
      arenas[t].upload(std::span<const float>(host.back()).subspan(n0), 4100);
    }
    reducer.set_accumulate(accumulate);
    reducer.run({}).wait();
    const std::vector<float> got = destination.download<float>();
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n0 + n1; ++i) {
      const std::size_t at = i < n0 ? i : offset1 / 4 + (i - n0);
      float sum = accumulate ? expected[at] : 0.0f;
      for (int t = 0; t < towers; ++t) {
        const float rounded =
            vkt::from_half(vkt::to_half(std::vector<float>{host[t][i]}, half), half)[0];
        sum = (t == 0 && !accumulate) ? rounded : sum + rounded;
      }
      expected[at] = sum;
      wrong += std::bit_cast<std::uint32_t>(got[at]) != std::bit_cast<std::uint32_t>(sum);
    }
    CHECK(wrong == 0);
  }
  CHECK_THAT(vkt::test::error_of([&] {
               vkt::GradientReducer r(segments, vkt::BufferRange(destination), 0, vkt::DType::I32);
             }),
             Contains("f32, f16 or bf16"));
}
