#include <catch2/catch.hpp>

#include <vktower/runtime/vulkan/buffer.h>
#include <vktower/runtime/vulkan/cross_device_copy.h>
#include <vktower/runtime/vulkan/device.h>
#include <vktower/runtime/vulkan/instance.h>
#include <vktower/runtime/vulkan/kernel.h>
#include <vktower/runtime/vulkan/stream.h>
#include "test_support.h"

using Catch::Matchers::Contains;

TEST_CASE("a staged copy moves data between two Devices on one physical device") {
  // Each side mapped (lavapipe's memcpy path) or staged (a discrete GPU's path,
  // taken there whatever force_staging says).
  // Both staged: through host memory both Devices import, where they can.
  const bool force_src = GENERATE(false, true);
  const bool force_dst = GENERATE(false, true);
  const bool import = GENERATE(true, false);
  vkt::Instance instance;
  vkt::Device a(instance, 0,
                vkt::DeviceOptions{.force_staging = force_src, .import_host_memory = import});
  vkt::Device b(instance, 0,
                vkt::DeviceOptions{.force_staging = force_dst, .import_host_memory = import});
  const bool src_staged = !a.maps_storage(), dst_staged = !b.maps_storage();
  INFO("source staged " << src_staged << ", destination staged " << dst_staged
                        << ", host memory imported " << import);
  if (force_src) REQUIRE(src_staged);
  if (force_dst) REQUIRE(dst_staged);
  if (!import) CHECK(a.host_import_alignment() == 0);
  // Mesa's lavapipe offers VK_EXT_external_memory_host: the path is tested here.
  if (import && a.info().is_lavapipe) CHECK(a.host_import_alignment() > 0);
  const std::size_t n = 10007;
  vkt::Buffer src(a, n * sizeof(float));
  vkt::Buffer dst(b, (n + 16) * sizeof(float));
  dst.upload(std::vector<float>(n + 16, -7.0f));

  // Source written on device A by a kernel, so the copy must wait for its ticket.
  const std::vector<float> x = vkt::test::random_floats(n, 11);
  src.upload(std::vector<float>(n, 0.0f));
  vkt::Buffer bx(a, n * sizeof(float));
  bx.upload(x);
  const vkt::Kernel& saxpy = a.kernel({.shader = "saxpy", .local_size = {256, 1, 1}});
  vkt::Stream produce(a);
  struct {
    float a;
    std::uint32_t n;
  } params{1.0f, static_cast<std::uint32_t>(n)};
  produce.dispatch(saxpy, {bx, src}, params, vkt::Stream::groups_for(saxpy, n));

  vkt::CrossDeviceCopy copy(src, vkt::BufferRange(dst, 8 * sizeof(float), n * sizeof(float)));
  CHECK(copy.device_copies() == int{src_staged} + int{dst_staged});
  CHECK(copy.imports_host_memory() == (src_staged && dst_staged && a.host_import_alignment() > 0));
  const vkt::Ticket written = produce.submit();
  copy.run({&written, 1});

  std::vector<float> out = dst.download<float>();
  for (std::size_t i = 0; i < 8; ++i) CHECK(out[i] == -7.0f);
  for (std::size_t i = 0; i < n; ++i) REQUIRE(out[8 + i] == x[i]);
  for (std::size_t i = n + 8; i < n + 16; ++i) CHECK(out[i] == -7.0f);

  // Built once, run again: each run carries the new data (imported: through
  // the other host allocation, then the first again).
  for (int run = 2; run <= 3; ++run) {
    const vkt::Ticket again = produce.submit();  // src = run x
    copy.run({&again, 1});
    out = dst.download<float>();
    for (std::size_t i = 0; i < n; ++i) REQUIRE(out[8 + i] == static_cast<float>(run) * x[i]);
  }
}

TEST_CASE("copy_across checks its ranges before touching anything") {
  vkt::Instance instance;
  vkt::Device a(instance, 0);
  vkt::Device b(instance, 0);
  vkt::Buffer src(a, 64);
  vkt::Buffer dst(b, 32);
  CHECK_THAT(vkt::test::error_of([&] { vkt::copy_across(src, dst); }),
             Contains("source holds 64 bytes but the destination 32"));
  CHECK_THAT(vkt::test::error_of([&] { vkt::copy_across(vkt::BufferRange(src, 48, 32), dst); }),
             Contains("lies outside its buffer of 64 bytes"));
  src.upload(std::vector<std::uint32_t>(16, 0xC0FFEEu));
  vkt::copy_across(vkt::BufferRange(src, 0, 32), dst);
  CHECK(dst.download<std::uint32_t>() == std::vector<std::uint32_t>(8, 0xC0FFEEu));
}

TEST_CASE("a broadcast reads its source once and fills every destination") {
  const bool force_src = GENERATE(false, true);
  vkt::Instance instance;
  vkt::Device a(instance, 0, vkt::DeviceOptions{.force_staging = force_src});
  vkt::Device b(instance, 0, vkt::DeviceOptions{.force_staging = false});  // mapped where it can be
  vkt::Device c(instance, 0, vkt::DeviceOptions{.force_staging = true});
  const bool src_staged = !a.maps_storage(), b_staged = !b.maps_storage();
  INFO("source staged " << src_staged << ", b staged " << b_staged);
  REQUIRE_FALSE(c.maps_storage());
  const std::size_t n = 777;
  const std::vector<float> x = vkt::test::random_floats(n, 5);
  vkt::Buffer src(a, n * sizeof(float));
  src.upload(x);
  vkt::Buffer same(a, n * sizeof(float));  // on the source's own Device: a device copy
  vkt::Buffer mapped(b, n * sizeof(float));
  vkt::Buffer staged(c, (n + 4) * sizeof(float));
  vkt::CrossDeviceCopy broadcast(
      src, {same, mapped, vkt::BufferRange(staged, 4 * sizeof(float), n * sizeof(float))});
  // 1 device copy on `a`, a download where the source is staged, an upload to
  // `b` where it is staged, an upload to `c`.
  CHECK(broadcast.device_copies() == 1 + int{src_staged} + int{b_staged} + 1);
  for (int run = 1; run <= 2; ++run) {
    const std::span<const vkt::Ticket> arrived = broadcast.start();
    REQUIRE(arrived.size() == 3);
    CHECK(arrived[0].device == &a);
    // Mapped, the host wrote it; staged, b's upload did.
    CHECK(arrived[1].device == (b_staged ? &b : nullptr));
    CHECK(arrived[2].device == &c);
    for (const vkt::Ticket& t : arrived) t.wait();
    CHECK(broadcast.host_waits() == static_cast<std::uint64_t>(run));  // one read per run
  }
  CHECK(same.download<float>() == x);
  CHECK(mapped.download<float>() == x);
  const std::vector<float> out = staged.download<float>();
  CHECK(std::vector<float>(out.begin() + 4, out.end()) == x);

  // Only the source's own Device: nothing passes through the host.
  vkt::CrossDeviceCopy local(src, vkt::BufferRange(same));
  local.run();
  CHECK(local.host_waits() == 0);
  CHECK_THROWS_WITH(vkt::CrossDeviceCopy(src, std::vector<vkt::BufferRange>{}),
                    Contains("no destination"));

  // Each destination after work of its own Device that still writes it: a
  // fill queued on `c` lands before the copy, not over it.
  std::vector<float> y = x;
  for (float& v : y) v += 1.0f;
  src.upload(y);
  vkt::Stream fill(c);
  fill.fill(vkt::BufferRange(staged, 4 * sizeof(float), n * sizeof(float)), 0);
  const std::vector<vkt::Ticket> after{vkt::Ticket{}, vkt::Ticket{}, fill.submit()};
  for (const vkt::Ticket& t : broadcast.start({}, after)) t.wait();
  const std::vector<float> again = staged.download<float>();
  CHECK(std::vector<float>(again.begin() + 4, again.end()) == y);
  CHECK_THROWS_WITH(broadcast.start({}, std::span<const vkt::Ticket>(after).first(2)),
                    Contains("2 tickets to follow for 3 destinations"));
}
