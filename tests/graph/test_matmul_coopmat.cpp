// The cooperative-matrix (tensor-core) f16 matmul: the tiles a device gets
// come from its own shapes and limits; half matmuls take it only where the
// device has cooperative matrices; and on such a device (a GPU: lavapipe has
// none, so there this part checks that no device claims them wrongly) every
// candidate tile's products, and a graph's, match double products within
// f16's rounding, as the tiled half kernel's do.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include <vktower/runtime/graph/executor.h>
#include <vktower/runtime/graph/graph.h>
#include <vktower/runtime/graph/half.h>
#include <vktower/runtime/graph/ops/matmul.h>
#include <vktower/runtime/graph/ops/matmul_coopmat.h>

#include "../shared_device.h"
#include "../test_support.h"

using vkt::CooperativeShape;
using vkt::CooperativeTile;
using vkt::DType;

namespace {

/// An H100 as its driver describes it: two f16 units, 32-wide subgroups.
vkt::DeviceInfo hopper_like() {
  vkt::DeviceInfo info;
  info.cooperative_f16 = {{16, 8, 8}, {16, 8, 16}};
  info.subgroup_size = 32;
  info.subgroup_compute_ops = true;
  info.max_workgroup_invocations = 1024;
  info.max_workgroup_size = {1024, 1024, 64};
  info.max_shared_memory_bytes = 49152;
  return info;
}

std::vector<float> random_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = vkt::f16_to_f32(vkt::f32_to_f16(dist(rng)));
  return v;
}

/// C = A B of f16 [m, k] and [k, n] values on `device`, as f32.
std::vector<float> half_product(vkt::Device& device, const std::vector<float>& a,
                                const std::vector<float>& b, std::int64_t m, std::int64_t k,
                                std::int64_t n) {
  vkt::Graph g(device);
  const vkt::Tensor c =
      vkt::matmul(g.input("a", {m, k}, DType::F16), g.input("b", {k, n}, DType::F16));
  vkt::Executor step(g, {c});
  step.feed("a", a);
  step.feed("b", b);
  step.run();
  return step.read(c);
}

}  // namespace

TEST_CASE("cooperative-matrix tiles: a device gets tiles of its own shapes within its limits") {
  vkt::DeviceInfo info = hopper_like();
  const std::vector<CooperativeTile> all = vkt::cooperative_candidates(info);
  REQUIRE(all.size() >= 8);
  CHECK(all.front().unit == CooperativeShape{16, 8, 16});  // the deeper unit first
  for (const CooperativeTile& t : all) {
    CHECK(vkt::cooperative_tile_fits(info, t));
    CHECK(t.bk % t.unit.k == 0);
    CHECK(t.shared_bytes() <= info.max_shared_memory_bytes);
    CHECK(CooperativeTile::from_values(t.values()) == t);
  }
  // Less shared memory: fewer tiles, each within it.
  info.max_shared_memory_bytes = 12 * 1024;
  const std::vector<CooperativeTile> small = vkt::cooperative_candidates(info);
  CHECK(!small.empty());
  CHECK(small.size() < all.size());
  for (const CooperativeTile& t : small) CHECK(t.shared_bytes() <= 12 * 1024);
  // A unit the device does not list, or a depth that is not a multiple of it.
  info = hopper_like();
  CHECK_FALSE(vkt::cooperative_tile_fits(info, CooperativeTile{{16, 16, 16}}));
  CHECK_FALSE(vkt::cooperative_tile_fits(info, CooperativeTile{{16, 8, 16}, 2, 2, 2, 4, 24}));
  CHECK(vkt::cooperative_tile_fits(info, CooperativeTile{{16, 8, 16}, 2, 2, 2, 4, 32}));
  // Workgroups of 8 subgroups of 64 are past a 256-invocation limit.
  info.subgroup_size = 64;
  info.max_workgroup_invocations = 256;
  for (const CooperativeTile& t : vkt::cooperative_candidates(info)) {
    CHECK(t.invocations(64) <= 256);
  }
  // No subgroup operations in compute shaders (gl_SubgroupID), or no units: none.
  info = hopper_like();
  info.subgroup_compute_ops = false;
  CHECK(vkt::cooperative_candidates(info).empty());
  info = hopper_like();
  info.cooperative_f16.clear();
  CHECK(vkt::cooperative_candidates(info).empty());
  CHECK_FALSE(CooperativeTile::from_values({16, 8, 16, 2, 2, 2, 4}).has_value());
}

TEST_CASE("half matmuls take cooperative matrices only where the device has them") {
  vkt::Device& device = vkt::test::shared_device();
  CHECK_FALSE(vkt::cooperative_tile(device, DType::BF16).has_value());
  if (device.info().cooperative_f16.empty()) {
    CHECK_FALSE(vkt::cooperative_tile(device, DType::F16).has_value());
  }
  // Turned off by the option, on any device.
  vkt::Device plain(device.instance(), device.info().index,
                    vkt::DeviceOptions{.disable_cooperative_matrix = true});
  CHECK(plain.info().cooperative_f16.empty());
  CHECK_FALSE(vkt::cooperative_tile(plain, DType::F16).has_value());
  // lavapipe has no cooperative matrices: it must not claim any.
  if (device.info().is_lavapipe) CHECK(device.info().cooperative_f16.empty());
}

TEST_CASE(
    "on each device with cooperative matrices every tile's f16 products, and a graph's, match "
    "double products within f16 rounding, as the tiled half kernel's do") {
  vkt::Instance& instance = vkt::test::shared_device().instance();
  int checked = 0;
  for (const vkt::DeviceInfo& info : instance.devices()) {
    if (info.cooperative_f16.empty() || !info.unusable_reason.empty()) continue;
    INFO(info.name);
    vkt::Device device(instance, info.index);
    for (const CooperativeTile& tile : vkt::cooperative_candidates(device.info())) {
      INFO(tile.str());
      for (int t = 0; t < 4; ++t) {
        CHECK(vkt::check_cooperative_tile(device, tile, 67, 45, 83, 2, t & 1, t & 2) == 0);
      }
    }
    REQUIRE(vkt::cooperative_tile(device, DType::F16).has_value());
    // A graph's matmul: the tuned tile, and the tiled half kernel on the same device.
    const std::int64_t m = 192, k = 288, n = 160;
    const std::vector<float> a = random_values(m * k, 5), b = random_values(k * n, 6);
    vkt::Device scalar(instance, info.index, {.disable_cooperative_matrix = true});
    const std::vector<float> tensor_cores = half_product(device, a, b, m, k, n);
    const std::vector<float> scalar_kernel = half_product(scalar, a, b, m, k, n);
    std::int64_t outside_tc = 0, outside_scalar = 0;
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        double sum = 0, magnitude = 0;
        for (std::int64_t p = 0; p < k; ++p) {
          sum += double(a[i * k + p]) * b[p * n + j];
          magnitude += std::abs(double(a[i * k + p]) * b[p * n + j]);
        }
        const double bound =
            std::ldexp(1.0, -11) * std::abs(sum) + k * std::ldexp(1.0, -24) * magnitude + 1e-7;
        outside_tc += !(std::abs(tensor_cores[i * n + j] - sum) <= bound);
        outside_scalar += !(std::abs(scalar_kernel[i * n + j] - sum) <= bound);
      }
    }
    CHECK(outside_tc == 0);
    CHECK(outside_scalar == 0);
    ++checked;
  }
  if (checked == 0) WARN("no device here has f16 cooperative matrices: nothing to check");
}
