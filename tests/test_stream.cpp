#include <catch2/catch.hpp>

#include <vktower/runtime/vulkan/buffer.h>
#include <vktower/runtime/vulkan/device.h>
#include <vktower/runtime/vulkan/instance.h>
#include <vktower/runtime/vulkan/kernel.h>
#include <vktower/runtime/vulkan/stream.h>
#include "test_support.h"

using Catch::Matchers::Contains;

namespace {

struct SaxpyParams {
  float a;
  std::uint32_t n;
};

// Small integers and a = 0.25 keep every step exact in float, so the replayed
// result can be compared for equality.
std::vector<float> small_integers(std::size_t n, int seed) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>(static_cast<int>((i * 7 + seed) % 9) - 4);
  return v;
}

}  // namespace

TEST_CASE("a recorded stream replayed 100 times accumulates exactly, allocating nothing") {
  vkt::Instance instance;
  vkt::Device device(instance, 0);
  const std::uint32_t n = 4099;
  const std::vector<float> x = small_integers(n, 1);
  const std::vector<float> y0 = small_integers(n, 5);
  vkt::Buffer bx(device, n * sizeof(float));
  vkt::Buffer by(device, n * sizeof(float));
  bx.upload(x);
  by.upload(y0);

  const vkt::Kernel& saxpy = device.kernel({.shader = "saxpy", .local_size = {256, 1, 1}});
  vkt::Stream step(device);
  step.dispatch(saxpy, {bx, by}, SaxpyParams{0.25f, n}, vkt::Stream::groups_for(saxpy, n));

  const std::uint64_t allocations = device.allocation_count();
  vkt::Ticket last;
  for (int i = 0; i < 100; ++i) last = step.submit();  // queued back to back
  last.wait();
  CHECK(last.done());
  CHECK(device.allocation_count() == allocations);

  const std::vector<float> y = by.download<float>();
  for (std::uint32_t i = 0; i < n; ++i) {
    REQUIRE(y[i] == y0[i] + 100 * 0.25f * x[i]);
  }
}

TEST_CASE("barriers are recorded exactly where commands depend on each other") {
  vkt::Instance instance;
  vkt::Device device(instance, 0);
  const std::uint32_t n = 256;
  vkt::Buffer a(device, n * sizeof(float));
  vkt::Buffer b(device, n * sizeof(float));
  vkt::Buffer c(device, n * sizeof(float));
  vkt::Buffer d(device, n * sizeof(float));
  a.upload(std::vector<float>(n, 1.0f));
  b.upload(std::vector<float>(n, 2.0f));
  c.upload(std::vector<float>(n, 3.0f));
  d.upload(std::vector<float>(n, 4.0f));
  const vkt::Kernel& saxpy = device.kernel({.shader = "saxpy", .local_size = {64, 1, 1}});
  const vkt::Groups groups = vkt::Stream::groups_for(saxpy, n);

  vkt::Stream stream(device);
  stream.dispatch(saxpy, {a, b}, SaxpyParams{1.0f, n}, groups);  // b = a + b = 3
  stream.dispatch(saxpy, {c, d}, SaxpyParams{1.0f, n}, groups);  // independent: d = 7
  CHECK(stream.barrier_count() == 0);
  stream.dispatch(saxpy, {a, c}, SaxpyParams{1.0f, n}, groups);  // c was read: WAR, c = 4
  CHECK(stream.barrier_count() == 1);
  stream.dispatch(saxpy, {c, b}, SaxpyParams{2.0f, n}, groups);  // reads c just written: b = 11
  CHECK(stream.barrier_count() == 2);
  stream.copy(vkt::BufferRange(b, 0, 64), vkt::BufferRange(a, 64, 64));  // reads b: RAW
  CHECK(stream.barrier_count() == 3);
  stream.copy(vkt::BufferRange(d, 0, 64), vkt::BufferRange(a, 512, 64));  // disjoint range of a
  CHECK(stream.barrier_count() == 3);
  stream.run();

  const auto fa = a.download<float>();
  CHECK(b.download<float>() == std::vector<float>(n, 11.0f));
  CHECK(c.download<float>() == std::vector<float>(n, 4.0f));
  CHECK(d.download<float>() == std::vector<float>(n, 7.0f));
  CHECK(fa[0] == 1.0f);
  CHECK(fa[16] == 11.0f);  // bytes 64..127
  CHECK(fa[128] == 7.0f);  // bytes 512..575
  CHECK(fa[255] == 1.0f);
}

TEST_CASE("fill and copy on the transfer queue, dispatch there is refused") {
  vkt::Instance instance;
  vkt::Device device(instance, 0);
  vkt::Buffer src(device, 1024);
  vkt::Buffer dst(device, 1024);
  vkt::Stream compute(device);
  compute.fill(src, 0x3f800000u);  // 1.0f
  compute.run();

  vkt::Stream transfer(device, vkt::QueueKind::Transfer);
  transfer.copy(src, dst);
  transfer.run();
  CHECK(dst.download<float>() == std::vector<float>(256, 1.0f));

  vkt::Stream copies(device, vkt::QueueKind::Transfer);
  const vkt::Kernel& saxpy = device.kernel({.shader = "saxpy"});
  CHECK_THAT(vkt::test::error_of([&] {
               copies.dispatch(saxpy, {src, dst}, SaxpyParams{1.0f, 4}, vkt::Groups{1, 1, 1});
             }),
             Contains("transfer queue, which runs copies only"));
}

TEST_CASE("stream misuse is a vkt::Error naming the problem") {
  vkt::Instance instance;
  vkt::Device device(instance, 0);
  vkt::Buffer a(device, 256);
  vkt::Buffer b(device, 128);
  vkt::Stream stream(device);
  CHECK_THAT(vkt::test::error_of([&] { stream.copy(a, b); }),
             Contains("source range holds 256 bytes but the destination 128"));
  CHECK_THAT(vkt::test::error_of(
                 [&] { stream.copy(vkt::BufferRange(a, 0, 128), vkt::BufferRange(a, 64, 128)); }),
             Contains("overlap"));
  CHECK_THAT(vkt::test::error_of([&] { stream.fill(vkt::BufferRange(a, 2, 8), 0); }),
             Contains("multiples of 4"));
  CHECK_THAT(vkt::test::error_of([&] { stream.copy(vkt::BufferRange(a, 200, 100), b); }),
             Contains("lies outside a buffer of 256 bytes"));
  stream.copy(vkt::BufferRange(a, 0, 128), b);
  stream.run();
  CHECK_THAT(vkt::test::error_of([&] { stream.fill(a, 0); }), Contains("already submitted"));
}

TEST_CASE("a segmented stream signals each segment's ticket, in order, and times itself") {
  vkt::Instance instance;
  vkt::Device device(instance, 0);
  const std::uint32_t n = 1031;
  const std::vector<float> x = small_integers(n, 2);
  vkt::Buffer bx(device, n * sizeof(float));
  vkt::Buffer a(device, n * sizeof(float));
  vkt::Buffer b(device, n * sizeof(float));
  bx.upload(x);
  a.upload(std::vector<float>(n, 0.0f));
  b.upload(std::vector<float>(n, 0.0f));
  const vkt::Kernel& saxpy = device.kernel({.shader = "saxpy", .local_size = {256, 1, 1}});
  vkt::Stream step(device);
  const bool timed = device.info().timestamps;
  if (timed) CHECK(step.timestamp() == 0);
  step.dispatch(saxpy, {bx, a}, SaxpyParams{1.0f, n}, vkt::Stream::groups_for(saxpy, n));
  CHECK(step.end_segment() == 0);
  // Reads what segment 0 wrote: the barrier at the new segment's start orders it.
  step.dispatch(saxpy, {a, b}, SaxpyParams{2.0f, n}, vkt::Stream::groups_for(saxpy, n));
  CHECK(step.end_segment() == 1);
  step.dispatch(saxpy, {b, a}, SaxpyParams{1.0f, n}, vkt::Stream::groups_for(saxpy, n));
  if (timed) CHECK(step.timestamp() == 1);
  CHECK(step.segment_count() == 3);

  for (int replay = 1; replay <= 2; ++replay) {
    const vkt::Ticket last = step.submit();
    const vkt::Ticket first = step.segment_ticket(0);
    CHECK(first.value + 2 == last.value);
    CHECK(step.segment_ticket(1).value + 1 == last.value);
    CHECK(step.segment_ticket(2).value == last.value);
    first.wait();  // segment 0 done: `a` holds what it wrote (the host may read it now)
    last.wait();
    if (timed) {
      CHECK(step.elapsed_ns(0, 1) > 0.0);  // three dispatches lie between them
      CHECK(step.elapsed_ns(1, 0) == -step.elapsed_ns(0, 1));
      CHECK(step.elapsed_ns(1, 1) == 0.0);
    }
  }
  // a += x; b += 2a; a += b, twice over (exact: small integers).
  std::vector<float> ea(n, 0.0f), eb(n, 0.0f);
  for (int replay = 0; replay < 2; ++replay) {
    for (std::uint32_t i = 0; i < n; ++i) {
      ea[i] += x[i];
      eb[i] += 2.0f * ea[i];
      ea[i] += eb[i];
    }
  }
  CHECK(a.download<float>() == ea);
  CHECK(b.download<float>() == eb);
  CHECK_THROWS_WITH(step.segment_ticket(3), Contains("segment 3"));
}

TEST_CASE("elapsed_ns between near and far timestamps: each interval, and their sum") {
  vkt::Instance instance;
  vkt::Device device(instance, 0);
  if (!device.info().timestamps) return;
  const std::uint32_t n = 4096;
  vkt::Buffer a(device, n * sizeof(float)), b(device, n * sizeof(float));
  a.upload(std::vector<float>(n, 1.0f));
  b.upload(std::vector<float>(n, 0.0f));
  const vkt::Kernel& saxpy = device.kernel({.shader = "saxpy", .local_size = {256, 1, 1}});
  vkt::Stream stream(device);
  // 40 timestamps: elapsed_ns reads those fewer than 16 apart together, the
  // others one by one, and a range of them across two query pools of 64.
  for (int i = 0; i < 40; ++i) {
    stream.timestamp();
    stream.dispatch(saxpy, {a, b}, SaxpyParams{1.0f, n}, vkt::Stream::groups_for(saxpy, n));
  }
  for (int i = 0; i < 50; ++i) stream.timestamp();
  stream.submit().wait();
  double sum = 0;
  for (std::size_t i = 0; i + 1 < 40; ++i) {
    const double step = stream.elapsed_ns(i, i + 1);
    CHECK(step >= 0.0);
    sum += step;
  }
  CHECK(stream.elapsed_ns(0, 39) == Approx(sum).epsilon(1e-9));  // far: two reads
  CHECK(stream.elapsed_ns(39, 0) == -stream.elapsed_ns(0, 39));
  CHECK(stream.elapsed_ns(30, 35) == -stream.elapsed_ns(35, 30));  // near: one read
  CHECK(stream.elapsed_ns(60, 70) >= 0.0);                         // across two pools
}

TEST_CASE("the device counts every host wait on a submitted ticket, and nothing else") {
  vkt::Instance instance;
  vkt::Device device(instance, 0);
  const std::uint32_t n = 1024;
  vkt::Buffer bx(device, n * sizeof(float)), by(device, n * sizeof(float));
  const vkt::Kernel& saxpy = device.kernel({.shader = "saxpy", .local_size = {256, 1, 1}});
  vkt::Stream step(device);
  step.dispatch(saxpy, {bx, by}, SaxpyParams{0.25f, n}, vkt::Stream::groups_for(saxpy, n));
  const std::uint64_t before = device.host_waits();
  vkt::Ticket last;
  for (int i = 0; i < 5; ++i) last = step.submit();  // queued: no wait
  CHECK(device.host_waits() == before);
  vkt::Ticket first = last;
  first.value -= 4;
  first.wait();
  CHECK(device.host_waits() == before + 1);
  last.wait();  // past the first: asks the device again
  CHECK(device.host_waits() == before + 2);
  last.wait();  // seen done: no trip to the device
  first.wait();
  vkt::Ticket().wait();  // nothing submitted: not a wait
  CHECK(device.host_waits() == before + 2);
  // Everything submitted, on every queue, in one wait.
  vkt::Buffer copy(device, n * sizeof(float));
  vkt::Stream transfer(device, vkt::QueueKind::Transfer);
  transfer.copy(bx, copy);
  const vkt::Ticket copied = transfer.submit();
  const vkt::Ticket stepped = step.submit();
  const std::vector<vkt::Ticket> all = device.submitted();
  CHECK(all.size() == (device.has_transfer_queue() ? 2u : 1u));
  device.wait_all(all);
  CHECK(device.host_waits() == before + 3);
  copied.wait();
  stepped.wait();
  CHECK(device.host_waits() == before + 3);
}

TEST_CASE("a Device makes the compute queues asked for, as far as the device offers them") {
  vkt::Instance instance;
  vkt::Device device(instance, 0, vkt::DeviceOptions{.compute_queues = 4});
  const std::uint32_t lanes = device.compute_queues();
  CHECK(lanes >= 1);
  CHECK(lanes <= 4);
  if (device.info().is_lavapipe) CHECK(lanes == 1);  // lavapipe offers one queue
  // Work on the last queue, waited for by work on the first: the same values.
  const std::uint32_t n = 256;
  vkt::Buffer bx(device, n * sizeof(float)), by(device, n * sizeof(float));
  bx.upload(std::vector<float>(n, 1.0f));
  by.upload(std::vector<float>(n, 0.0f));
  const vkt::Kernel& saxpy = device.kernel({.shader = "saxpy", .local_size = {256, 1, 1}});
  struct {
    float a;
    std::uint32_t n;
  } params{2.0f, n};
  vkt::Stream last(device, vkt::QueueKind::Compute, lanes - 1);
  last.dispatch(saxpy, {bx, by}, params, vkt::Stream::groups_for(saxpy, n));
  vkt::Stream first(device, vkt::QueueKind::Compute, 0);
  first.dispatch(saxpy, {bx, by}, params, vkt::Stream::groups_for(saxpy, n));
  const vkt::Ticket a = last.submit();
  CHECK(a.lane == lanes - 1);
  first.submit({&a, 1}).wait();
  CHECK(by.download<float>() == std::vector<float>(n, 4.0f));
  CHECK(device.submitted().size() == lanes + (device.has_transfer_queue() ? 1u : 0u));
  CHECK_THROWS_WITH(vkt::Stream(device, vkt::QueueKind::Compute, lanes),
                    Catch::Matchers::Contains("compute queue"));
}
