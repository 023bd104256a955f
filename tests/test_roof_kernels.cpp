// The kernels vkt-bench-peak times (bench/device_roof.cpp): a roof is only
// as good as the work it counts, so each computes what its FLOP or byte count
// says, checked against the host.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include <vktower/runtime/vulkan/buffer.h>
#include <vktower/runtime/vulkan/device.h>
#include <vktower/runtime/vulkan/kernel.h>
#include <vktower/runtime/vulkan/stream.h>
#include "shared_device.h"
#include "test_support.h"

namespace {

struct FmaParams {
  float mul;
  float add;
  std::uint32_t iterations;
};

/// peak_fma.comp's result for invocation `id`: every chain starts at its own
/// seed and takes 8 steps a = a * mul + add per iteration; the chains are summed.
std::vector<double> fma_reference(std::uint32_t id, std::uint32_t chains, const FmaParams& p) {
  std::vector<double> sum(4, 0.0);
  for (std::uint32_t k = 0; k < chains; ++k) {
    for (int c = 0; c < 4; ++c) {
      double a = static_cast<double>(id & 1023u) / 1024.0 + 0.25 * c + k;
      for (std::uint32_t s = 0; s < 8 * p.iterations; ++s) a = a * p.mul + p.add;
      sum[static_cast<std::size_t>(c)] += a;
    }
  }
  return sum;
}

}  // namespace

TEST_CASE("peak_fma runs every chain the specialization asks for, 8 steps per iteration",
          "[roof]") {
  vkt::Device& device = vkt::test::shared_device();
  const std::uint32_t local = 32, groups = 3, threads = local * groups;
  const FmaParams params{0.75f, 0.5f, 3};
  for (const std::uint32_t chains : {1u, 5u, 16u}) {
    CAPTURE(chains);
    const vkt::Kernel& kernel = device.kernel({.shader = "peak_fma",
                                               .local_size = {local, 1, 1},
                                               .constants = {vkt::SpecConstant::u32(1, chains)}});
    vkt::Buffer out(device, threads * 4 * sizeof(float));
    vkt::Stream stream(device);
    stream.dispatch(kernel, {out}, params, {groups, 1, 1});
    stream.run();
    const std::vector<float> got = out.download<float>();
    double worst = 0;
    for (std::uint32_t id = 0; id < threads; ++id) {
      const std::vector<double> want = fma_reference(id, chains, params);
      for (int c = 0; c < 4; ++c) {
        const double g = got[id * 4 + static_cast<std::uint32_t>(c)];
        worst = std::max(worst, std::abs(g - want[static_cast<std::size_t>(c)]) /
                                    std::abs(want[static_cast<std::size_t>(c)]));
      }
    }
    CHECK(worst < 1e-5);
  }
}

TEST_CASE("copy_vec4 copies n vec4s with any number of invocations and nothing past them",
          "[roof]") {
  vkt::Device& device = vkt::test::shared_device();
  const std::uint32_t n = 1000, tail = 7;  // n is no multiple of the invocations
  const std::vector<float> src = vkt::test::random_floats((n + tail) * 4, 3);
  const std::vector<float> dst = vkt::test::random_floats((n + tail) * 4, 4);
  for (const std::uint32_t groups : {1u, 3u, 40u}) {  // 40 x 64 invocations > n
    CAPTURE(groups);
    vkt::Buffer a(device, src.size() * sizeof(float));
    vkt::Buffer b(device, dst.size() * sizeof(float));
    a.upload(src);
    b.upload(dst);
    const vkt::Kernel& kernel = device.kernel({.shader = "copy_vec4", .local_size = {64, 1, 1}});
    vkt::Stream stream(device);
    stream.dispatch(kernel, {a, b}, n, {groups, 1, 1});
    stream.run();
    const std::vector<float> got = b.download<float>();
    std::vector<float> want(src.begin(), src.begin() + n * 4);
    want.insert(want.end(), dst.begin() + n * 4, dst.end());
    CHECK(got == want);
  }
}

TEST_CASE(
    "peak_coopmat, on each device with cooperative matrices, does every multiply-add of every "
    "chain its FLOP count says",
    "[roof]") {
  vkt::Instance& instance = vkt::test::shared_device().instance();
  int checked = 0;
  for (const vkt::DeviceInfo& info : instance.devices()) {
    if (info.cooperative_f16.empty() || !info.unusable_reason.empty()) continue;
    vkt::Device device(instance, info.index);
    for (const vkt::CooperativeShape& unit : info.cooperative_f16) {
      for (const std::uint32_t chains : {1u, 3u, 8u}) {
        CAPTURE(info.name, unit.m, unit.n, unit.k, chains);
        const vkt::Kernel& kernel = device.kernel(
            {.shader = "peak_coopmat",
             .local_size = {2 * info.subgroup_size, 1, 1},
             .constants = {vkt::SpecConstant::u32(3, unit.m), vkt::SpecConstant::u32(4, unit.n),
                           vkt::SpecConstant::u32(5, unit.k), vkt::SpecConstant::u32(6, chains)}});
        const std::uint32_t iterations = 5;
        vkt::Buffer out(device, 64 * unit.m * unit.n * sizeof(float));
        vkt::Stream stream(device);
        stream.fill(out, 0);
        stream.dispatch(kernel, {out}, iterations, {3, 1, 1});
        stream.run();
        // Every element: chains x iterations products of LK terms 2^-10 x 2^-10.
        const double want = double(chains) * iterations * unit.k * std::ldexp(1.0, -20);
        const std::vector<float> got = out.download<float>();
        for (std::uint32_t e = 0; e < 6 * unit.m * unit.n; ++e) CHECK(got[e] == want);
      }
    }
    ++checked;
  }
  if (checked == 0) WARN("no device here has f16 cooperative matrices: nothing to check");
}
