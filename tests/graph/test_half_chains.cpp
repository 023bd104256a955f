// Casts inside the Executor's fused elementwise chains: a chain reads half
// tensors (widened as it reads them) and writes them (two elements an
// invocation, whole words), so the casts around a half product cost no
// kernel of their own. Every fused program gives the unfused program's bits
// (each cast then its own cast.comp) in fewer commands, counted exactly, and
// the host's conversions of the f32 arithmetic.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include <vktower/runtime/graph/half.h>
#include <vktower/runtime/graph/ops/cast.h>
#include <vktower/runtime/graph/ops/elementwise.h>

#include "../shared_device.h"
#include "../test_support.h"
#include "fusion_check.h"
#include "matmul_variant_scope.h"

using vkt::DType;
using vkt::Tensor;
using vkt::test::check_fused;
using vkt::test::Feeds;

namespace {

float f16(float v) {
  return vkt::f16_to_f32(vkt::f32_to_f16(v));
}
float bf16(float v) {
  return vkt::bf16_to_f32(vkt::f32_to_bf16(v));
}

}  // namespace

TEST_CASE("a fused chain casts as it reads and writes: f32 to f16 and back, a bf16 output") {
  vkt::Graph g(vkt::test::shared_device());
  // 35 elements: an odd count, so the last half word holds one element.
  const Tensor x = g.input("x", {7, 5}), col = g.input("col", {5});
  const Tensor y = vkt::relu(vkt::cast(vkt::cast(x, DType::F16), DType::F32) + col);  // fetched
  const Tensor z = vkt::cast(y, DType::BF16);
  const Feeds feeds{{"x", vkt::test::random_floats(35, 1, -3.0f, 3.0f)},
                    {"col", vkt::test::random_floats(5, 2)}};
  // Two casts, add, relu and a cast: one kernel writing z in bf16 and y in f32.
  const vkt::test::FusionOutcome fused = check_fused(g, {y, z}, feeds, 4);
  for (std::size_t i = 0; i < 35; ++i) {
    INFO("element " << i);
    const float expected = std::max(f16(feeds.at("x")[i]) + feeds.at("col")[i % 5], 0.0f);
    CHECK(fused.values[0][i] == expected);
    CHECK(fused.values[1][i] == bf16(expected));
  }
}

TEST_CASE("a fused chain reads a half input and stores a half link that is read again") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor h = g.input("h", {3, 11}, DType::F16);
  // exp of the widened input, kept as bf16: half in, half out.
  const Tensor e = vkt::cast(vkt::exp(vkt::cast(h, DType::F32)), DType::BF16);
  // A half link that the chain stores (it is fetched) and reads on: f32 out.
  const Tensor s = vkt::cast(vkt::sigmoid(vkt::cast(h, DType::F32)), DType::F16);
  const Tensor t = vkt::cast(s, DType::F32) * 3.0f;
  const std::vector<float> values = vkt::test::random_floats(33, 3, -4.0f, 4.0f);
  // Eight kernels unfused; two chains fused (cast, exp, cast; cast, sigmoid,
  // cast, cast, mul).
  const vkt::test::FusionOutcome fused = check_fused(g, {e, s, t}, {{"h", values}}, 6);
  for (std::size_t i = 0; i < 33; ++i) {
    INFO("element " << i);
    const float in = f16(values[i]);  // the feed rounds to f16 on the host
    // The device's exp and sigmoid are within a few f32 ulps of the host's;
    // rounded to the half types they agree except at a rounding boundary.
    CHECK(fused.values[0][i] == Approx(bf16(std::exp(in))).epsilon(1.0 / 128));
    CHECK(fused.values[1][i] == Approx(f16(1.0f / (1.0f + std::exp(-in)))).epsilon(1.0 / 1024));
    CHECK(fused.values[2][i] == fused.values[1][i] * 3.0f);
    CHECK(f16(fused.values[1][i]) == fused.values[1][i]);
    CHECK(bf16(fused.values[0][i]) == fused.values[0][i]);
  }
}

TEST_CASE("the fp16 policy's casts around half products fuse into the training step's chains") {
  // The tiled kernels: the half product is matmul_half_tiled.comp between casts, as
  // on a GPU (the texel kernel rounds in place and has no half tensor).
  const vkt::test::VariantScope tiled("tiled");
  // The f32 step's chains (bias_add, tanh, sigmoid, sub; the broadcast and
  // the three activations' gradients: 6 saved), the first now starting with
  // the cast of the half product to f32: 7 saved.
  vkt::test::check_dense_tanh_step(vkt::Precision::F16, 7);
}
