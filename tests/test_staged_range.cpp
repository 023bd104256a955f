// StagedRange, the one staged path of a step's transfers: a mapped range is its
// own host side and copies nothing; an unmapped one (or one staged on purpose)
// goes through staging with one recorded copy each way; bad staging is refused.
#include <catch2/catch.hpp>

#include <cstring>

#include <vktower/runtime/vulkan/buffer.h>
#include <vktower/runtime/vulkan/device.h>
#include <vktower/runtime/vulkan/instance.h>
#include <vktower/runtime/vulkan/staged_range.h>

#include "test_support.h"

using Catch::Matchers::Contains;
using Direction = vkt::StagedRange::Direction;

TEST_CASE("a staged range round-trips a range's bytes, mapped or staged") {
  const bool force_staging = GENERATE(false, true);
  INFO("force_staging " << force_staging);
  vkt::Instance instance;
  vkt::Device device(instance, 0, vkt::DeviceOptions{.force_staging = force_staging});
  const std::size_t n = 37;
  const std::vector<float> x = vkt::test::random_floats(n, 11);
  vkt::Buffer buffer(device, (n + 3) * sizeof(float));
  const vkt::BufferRange range(buffer, 3 * sizeof(float), n * sizeof(float));
  vkt::StagedRange up(range, Direction::ToDevice);
  vkt::StagedRange down(range, Direction::ToHost);
  CHECK(up.staged() == !device.maps_storage());
  CHECK(down.staged() == !device.maps_storage());
  CHECK(up.host().size() == n * sizeof(float));
  std::memcpy(up.host().data(), x.data(), n * sizeof(float));
  const vkt::Ticket arrived = up.submit();
  CHECK((arrived.device != nullptr) == up.staged());
  // Where mapped the host wrote the range itself, so `down` sees it at once.
  down.submit({&arrived, 1}).wait();
  std::vector<float> back(n);
  std::memcpy(back.data(), down.host().data(), n * sizeof(float));
  CHECK(back == x);
  // Staged on purpose even where mapped: a copy of the value at that point.
  vkt::StagedRange snapshot(range, Direction::ToHost, {.even_if_mapped = true});
  CHECK(snapshot.staged());
  snapshot.submit().wait();
  std::memcpy(up.host().data(), std::vector<float>(n, 0.0f).data(), n * sizeof(float));
  up.submit().wait();
  std::memcpy(back.data(), snapshot.host().data(), n * sizeof(float));
  CHECK(back == x);
}

TEST_CASE("a staged range refuses staging that is not host-visible memory of its size") {
  vkt::Instance instance;
  vkt::Device device(instance, 0, vkt::DeviceOptions{.force_staging = true});
  vkt::Buffer storage(device, 64), staging(device, 64, vkt::BufferKind::Staging);
  CHECK_THROWS_WITH(
      vkt::StagedRange(storage, Direction::ToHost, {.through = vkt::BufferRange(storage)}),
      Contains("not host-visible"));
  CHECK_THROWS_WITH(
      vkt::StagedRange(storage, Direction::ToHost, {.through = vkt::BufferRange(staging, 0, 32)}),
      Contains("32 bytes"));
  vkt::StagedRange recorded(storage, Direction::ToHost,
                            {.through = vkt::BufferRange(staging), .submits = false});
  CHECK(recorded.staged());
  CHECK_THROWS_WITH(recorded.submit(), Contains("recorded into a caller's stream"));
}
