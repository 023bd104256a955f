// Host transfers of unmapped buffers go through one reused staging buffer and
// command buffer per Device: after the first, they make nothing.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <thread>

#include <vktower/runtime/vulkan/buffer.h>
#include <vktower/runtime/vulkan/device.h>
#include <vktower/runtime/vulkan/host_transfer.h>
#include <vktower/runtime/vulkan/instance.h>
#include "test_support.h"

using Catch::Matchers::Contains;

namespace {

std::vector<std::byte> random_bytes(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> bytes(n);
  for (std::byte& b : bytes) b = static_cast<std::byte>(rng() & 0xFF);
  return bytes;
}

}  // namespace

TEST_CASE("repeated uploads and downloads make nothing after the first, staged and mapped") {
  const bool force_staging = GENERATE(false, true);
  vkt::Instance instance;
  vkt::Device device(instance, 0, vkt::DeviceOptions{.force_staging = force_staging});
  const bool staged = !device.maps_storage();  // a discrete GPU stages either way
  INFO("force_staging = " << force_staging << ", staged " << staged);
  if (force_staging) REQUIRE(staged);
  const std::size_t n = 4099;
  vkt::Buffer buffer(device, n * sizeof(float));
  REQUIRE(buffer.mapped() == !staged);

  const vkt::DeviceObjectCounts before = device.object_counts();
  buffer.upload(vkt::test::random_floats(n, 1));
  const vkt::DeviceObjectCounts first = device.object_counts();
  if (staged) {
    // Exactly the reused pieces: one staging buffer, one command pool and buffer.
    vkt::DeviceObjectCounts expected = before;
    expected.memory_allocations += 1;
    expected.command_pools += 1;
    expected.command_buffers += 1;
    CHECK(to_string(first) == to_string(expected));
  } else {
    CHECK(to_string(first) == to_string(before));
  }

  for (std::uint32_t i = 0; i < 30; ++i) {
    // Whole, partial and odd-sized transfers, none larger than the first.
    const std::vector<float> data = vkt::test::random_floats(n, 100 + i);
    buffer.upload(data);
    REQUIRE(buffer.download<float>() == data);
    const std::vector<std::byte> patch = random_bytes(1 + i * 37, 7 + i);
    const std::size_t offset = (i * 131) % (n * sizeof(float) - patch.size());
    buffer.upload(std::span<const std::byte>(patch), offset);
    std::vector<std::byte> back(patch.size());
    buffer.download(std::span<std::byte>(back), offset);
    REQUIRE(back == patch);
  }
  CHECK(to_string(device.object_counts()) == to_string(first));
  CHECK(device.object_counts() == first);
}

TEST_CASE("a transfer larger than the staging chunk goes through in pieces of one staging buffer") {
  vkt::Instance instance;
  // 1000 bytes: not a multiple of 4, so pieces start at odd offsets.
  vkt::Device device(instance, 0,
                     vkt::DeviceOptions{.force_staging = true, .staging_chunk_bytes = 1000});
  const std::size_t bytes = 10007;
  vkt::Buffer buffer(device, bytes);
  const std::uint64_t allocations = device.allocation_count();

  const std::vector<std::byte> data = random_bytes(bytes - 3, 11);
  buffer.upload(std::span<const std::byte>(data), 3);
  CHECK(device.host_transfer().staging_bytes() == 1000);
  CHECK(device.allocation_count() == allocations + 1);
  std::vector<std::byte> back(data.size());
  buffer.download(std::span<std::byte>(back), 3);
  CHECK(back == data);
  // The first 3 bytes were never written by this upload; a piece that slipped
  // by one byte would show here or in `back`.
  const std::vector<std::byte> whole = buffer.download<std::byte>();
  CHECK(std::equal(data.begin(), data.end(), whole.begin() + 3));
  CHECK(device.allocation_count() == allocations + 1);
}

TEST_CASE("the staging buffer grows only for a larger transfer and frees the smaller one") {
  vkt::Instance instance;
  vkt::Device device(instance, 0, vkt::DeviceOptions{.force_staging = true});
  vkt::Buffer buffer(device, 200 * 1024);
  vkt::Buffer small(device, 16);
  const std::uint64_t allocations = device.allocation_count();
  const std::uint64_t bytes = device.allocated_bytes();

  small.upload(std::vector<std::uint32_t>{1, 2, 3, 4});
  CHECK(device.host_transfer().staging_bytes() == 64 * 1024);  // small ones share 64 KiB
  CHECK(small.download<std::uint32_t>() == std::vector<std::uint32_t>{1, 2, 3, 4});
  CHECK(device.allocation_count() == allocations + 1);

  const std::vector<std::byte> data = random_bytes(100 * 1024, 5);
  buffer.upload(std::span<const std::byte>(data));
  CHECK(device.host_transfer().staging_bytes() == 128 * 1024);  // the next power of two
  CHECK(device.allocation_count() == allocations + 2);
  // The 64 KiB one is gone: one staging buffer at a time.
  CHECK(device.allocated_bytes() - bytes < 128 * 1024 + 64 * 1024);

  std::vector<std::byte> back(data.size());
  buffer.download(std::span<std::byte>(back));
  CHECK(back == data);
  CHECK(small.download<std::uint32_t>()[3] == 4);
  CHECK(device.allocation_count() == allocations + 2);
}

TEST_CASE("threads share one device's host transfers and each gets its own bytes back") {
  vkt::Instance instance;
  vkt::Device device(instance, 0, vkt::DeviceOptions{.force_staging = true});
  constexpr int kThreads = 4;
  std::vector<vkt::Buffer> buffers;
  for (int t = 0; t < kThreads; ++t) buffers.emplace_back(device, 4096);
  buffers[0].upload(std::vector<float>(1024, 0.0f));  // makes the staging buffer
  const vkt::DeviceObjectCounts counts = device.object_counts();

  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (std::uint32_t i = 0; i < 20; ++i) {
        const std::vector<float> data =
            vkt::test::random_floats(1024, static_cast<std::uint32_t>(t) * 1000 + i);
        buffers[t].upload(data);
        if (buffers[t].download<float>() != data) ++mismatches[t];
      }
    });
  }
  for (std::thread& th : threads) th.join();
  CHECK(mismatches == std::vector<int>(kThreads, 0));
  CHECK(to_string(device.object_counts()) == to_string(counts));
}

TEST_CASE("a staging chunk of 0 bytes is refused when the device is made") {
  vkt::Instance instance;
  CHECK_THAT(vkt::test::error_of([&] {
               vkt::Device device(instance, 0, vkt::DeviceOptions{.staging_chunk_bytes = 0});
             }),
             Contains("staging_chunk_bytes is 0"));
}
