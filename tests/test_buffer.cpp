#include <catch2/catch.hpp>

#include <cstring>

#include <vktower/runtime/vulkan/buffer.h>
#include <vktower/runtime/vulkan/device.h>
#include <vktower/runtime/vulkan/instance.h>
#include "test_support.h"

using Catch::Matchers::Contains;

TEST_CASE("buffer upload and download round-trip random data") {
  const bool force_staging = GENERATE(false, true);
  INFO("force_staging = " << force_staging);
  vkt::Instance instance;
  vkt::Device device(instance, 0, vkt::DeviceOptions{.force_staging = force_staging});
  const std::vector<float> data = vkt::test::random_floats(12347, 7);

  vkt::Buffer buffer(device, data.size() * sizeof(float));
  CHECK(buffer.size() == data.size() * sizeof(float));
  CHECK(buffer.mapped() == (device.maps_storage()));
  if (force_staging) CHECK_FALSE(buffer.mapped());
  buffer.upload(data);
  CHECK(buffer.download<float>() == data);

  // A partial write at an offset leaves the rest alone.
  const std::vector<float> patch = {1.5f, -2.25f, 3.0f};
  buffer.upload(patch, 100 * sizeof(float));
  std::vector<float> expected = data;
  std::copy(patch.begin(), patch.end(), expected.begin() + 100);
  CHECK(buffer.download<float>() == expected);

  std::vector<float> window(5);
  buffer.download(std::as_writable_bytes(std::span<float>(window)), 99 * sizeof(float));
  CHECK(window == std::vector<float>{data[99], 1.5f, -2.25f, 3.0f, data[103]});
}

TEST_CASE("staging buffers are persistently mapped host memory") {
  vkt::Instance instance;
  vkt::Device device(instance, 0);
  vkt::Buffer staging(device, 64, vkt::BufferKind::Staging);
  REQUIRE(staging.mapped());
  std::memset(staging.host().data(), 0xAB, 64);
  const auto bytes = staging.download<std::uint8_t>();
  CHECK(bytes == std::vector<std::uint8_t>(64, 0xAB));
}

TEST_CASE("buffers are move-only and free their memory") {
  vkt::Instance instance;
  vkt::Device device(instance, 0, vkt::DeviceOptions{});
  if (!device.maps_storage()) {
    // A discrete GPU stages transfers through one staging buffer, made on first
    // use and kept: make it now, as large as the transfers below, so that the
    // counts see the buffers alone.
    vkt::Buffer warm(device, 4096);
    warm.upload(std::vector<std::byte>(4096));
  }
  const std::uint64_t allocations = device.allocation_count();
  const std::uint64_t bytes = device.allocated_bytes();
  {
    vkt::Buffer a(device, 4096);
    CHECK(device.allocation_count() == allocations + 1);
    CHECK(device.allocated_bytes() >= bytes + 4096);
    a.upload(std::vector<std::uint32_t>{1, 2, 3});
    vkt::Buffer b = std::move(a);
    CHECK_FALSE(static_cast<bool>(a));  // NOLINT(bugprone-use-after-move): testing it
    CHECK(b.download<std::uint32_t>()[2] == 3);
    a = vkt::Buffer(device, 16);
    CHECK(device.allocation_count() == allocations + 2);
  }
  CHECK(device.allocated_bytes() == bytes);
}

TEST_CASE("buffer misuse is a vkt::Error naming the problem") {
  vkt::Instance instance;
  vkt::Device device(instance, 0);
  const std::uint64_t bytes = device.allocated_bytes();

  CHECK_THAT(vkt::test::error_of([&] { vkt::Buffer b(device, 0); }), Contains("0 bytes"));

  const std::size_t one_tib = std::size_t{1} << 40;
  const std::string oom = vkt::test::error_of([&] { vkt::Buffer b(device, one_tib); });
  CHECK_THAT(oom, Contains("1024.00 GiB"));
  CHECK_THAT(oom, Contains("can allocate at most"));
  CHECK(device.allocated_bytes() == bytes);  // nothing leaked on the error path

  vkt::Buffer small(device, 16);
  const std::vector<float> five(5, 1.0f);
  CHECK_THAT(vkt::test::error_of([&] { small.upload(five); }),
             Contains("cannot upload 20 bytes at offset 0: the buffer holds 16 bytes"));
  CHECK_THAT(vkt::test::error_of([&] { small.upload(five, 8); }), Contains("offset 8"));

  vkt::Device staged(instance, 0, vkt::DeviceOptions{.force_staging = true});
  vkt::Buffer unmapped(staged, 16);
  CHECK_THAT(vkt::test::error_of([&] { (void)unmapped.host(); }),
             Contains("use upload()/download()"));
}
