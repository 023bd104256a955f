// The half types: host conversions against an independent rounding in double,
// the device's cast against the host's bits, and the errors a user meets (the
// half matmul: test_half_matmul.cpp).
#include <bit>
#include <cmath>
#include <limits>

#include <vktower/runtime/graph/half.h>
#include <vktower/runtime/graph/ops/cast.h>

#include <vktower/vktower.h>

#include "../shared_device.h"
#include "../test_support.h"

using Catch::Matchers::Contains;
using vkt::DType;
using vkt::Tensor;
using vkt::test::same_bits;

namespace {

/// `v` rounded to the nearest value of a format with `mantissa` stored bits,
/// smallest normal exponent `min_exp` and largest finite `max_finite`, ties to
/// even, computed in double (nearbyint rounds half to even): a rounding
/// written independently of half.cpp's bit manipulation.
double round_to_format(double v, int mantissa, int min_exp, double max_finite) {
  if (std::isnan(v) || std::isinf(v) || v == 0) return v;
  const int e = std::max(std::ilogb(v), min_exp);
  const double ulp = std::ldexp(1.0, e - mantissa);
  const double r = std::nearbyint(v / ulp) * ulp;
  // Past the largest finite value by half an ulp or more: infinity.
  const double limit = max_finite + std::ldexp(1.0, std::ilogb(max_finite) - mantissa - 1);
  if (std::abs(r) >= limit || std::abs(v) >= limit) return std::copysign(INFINITY, v);
  return r == 0 ? std::copysign(0.0, v) : r;
}

double f16_reference(float v) {
  return round_to_format(v, 10, -14, 65504.0);
}
double bf16_reference(float v) {
  return round_to_format(v, 7, -126, static_cast<double>(std::ldexp(255.0f / 128.0f, 127)));
}

/// Values at every edge of both formats, then random ones over a wide range.
std::vector<float> edge_values() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.0f,
                          inf,
                          -inf,
                          65504.0f,
                          65519.99f,
                          65520.0f,
                          -65520.0f,
                          70000.0f,  // f16 top
                          std::ldexp(1.0f, -14),
                          std::ldexp(1023.0f, -24),  // f16 normal edge
                          std::ldexp(1.0f, -24),
                          std::ldexp(1.0f, -25),  // smallest, its tie
                          std::ldexp(1.5f, -25),
                          std::ldexp(3.0f, -25),  // ties to even
                          std::ldexp(1.0f, -26),
                          1.0f + std::ldexp(1.0f, -11),
                          1.0f + std::ldexp(3.0f, -11),
                          1.0f + std::ldexp(1.0f, -8),
                          1.0f + std::ldexp(3.0f, -8),
                          1.0f + std::ldexp(1.0f, -7),
                          std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::min(),
                          std::numeric_limits<float>::denorm_min(),
                          std::ldexp(0.75f, -126),
                          std::ldexp(255.5f, -134)};
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-30, 20);
  for (int i = 0; i < 2000; ++i) {
    const float m = mantissa(rng) * (i % 2 == 0 ? 1.0f : -1.0f);
    v.push_back(std::ldexp(m, exponent(rng)));
  }
  v.push_back(1.0f);  // an odd count: the last half word is half used
  return v;
}

}  // namespace

TEST_CASE(
    "f32 to f16 and bf16 on the host: nearest with ties to even, overflow to infinity, "
    "subnormals kept, NaN stays NaN") {
  std::int64_t wrong_f16 = 0, wrong_bf16 = 0;
  for (const float v : edge_values()) {
    const float h = vkt::f16_to_f32(vkt::f32_to_f16(v));
    const float b = vkt::bf16_to_f32(vkt::f32_to_bf16(v));
    const double want_h = f16_reference(v), want_b = bf16_reference(v);
    if (!(h == want_h && std::signbit(h) == std::signbit(want_h))) {
      ++wrong_f16;
      UNSCOPED_INFO("f16 of " << std::hexfloat << v << ": " << h << ", want " << want_h);
    }
    if (!(b == want_b && std::signbit(b) == std::signbit(want_b))) {
      ++wrong_bf16;
      UNSCOPED_INFO("bf16 of " << std::hexfloat << v << ": " << b << ", want " << want_b);
    }
  }
  CHECK(wrong_f16 == 0);
  CHECK(wrong_bf16 == 0);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(std::isnan(vkt::f16_to_f32(vkt::f32_to_f16(nan))));
  CHECK(std::isnan(vkt::bf16_to_f32(vkt::f32_to_bf16(nan))));
  // A signalling NaN whose payload lies in the low bits stays a NaN (not infinity).
  const float low_nan = std::bit_cast<float>(0x7f800001u);
  CHECK(std::isnan(vkt::f16_to_f32(vkt::f32_to_f16(low_nan))));
  CHECK(std::isnan(vkt::bf16_to_f32(vkt::f32_to_bf16(low_nan))));
  // Every f16 and bf16 value survives the trip to f32 and back.
  std::int64_t changed = 0;
  for (std::uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    const bool nan_h = (bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu) != 0;
    const bool nan_b = (bits & 0x7f80u) == 0x7f80u && (bits & 0x7fu) != 0;
    if (!nan_h) changed += vkt::f32_to_f16(vkt::f16_to_f32(h)) != h;
    if (!nan_b) changed += vkt::f32_to_bf16(vkt::bf16_to_f32(h)) != h;
  }
  CHECK(changed == 0);
}

TEST_CASE("cast on the device gives the host conversions' bits, f32 to f16 and bf16 and back") {
  const std::vector<float> values = edge_values();
  const auto n = static_cast<std::int64_t>(values.size());
  for (const DType half : {DType::F16, DType::BF16}) {
    INFO(vkt::to_string(half));
    const DType other = half == DType::F16 ? DType::BF16 : DType::F16;
    vkt::Graph g(vkt::test::shared_device());
    const Tensor x = g.input("x", {n});
    const Tensor h = vkt::cast(x, half);            // f32 -> half
    const Tensor hx = g.input("h", {n}, half);      // a half feed, rounded on the host
    const Tensor back = vkt::cast(hx, DType::F32);  // half -> f32
    const Tensor across = vkt::cast(hx, other);     // half -> the other half
    vkt::Executor exec(g, {h, back, across});
    exec.feed("x", values);
    exec.feed("h", values);
    exec.run();
    const std::vector<std::uint16_t> want = vkt::to_half(values, half);
    const std::vector<float> want_f = vkt::from_half(want, half);
    const std::vector<float> want_across = vkt::from_half(vkt::to_half(want_f, other), other);
    const std::vector<float> got_h = exec.read(h), got_back = exec.read(back),
                             got_across = exec.read(across);
    std::int64_t wrong = 0, wrong_back = 0, wrong_across = 0;
    for (std::size_t i = 0; i < values.size(); ++i) {
      wrong += !same_bits(got_h[i], want_f[i]);
      wrong_back += !same_bits(got_back[i], want_f[i]);
      wrong_across += !same_bits(got_across[i], want_across[i]);
    }
    CHECK(wrong == 0);
    CHECK(wrong_back == 0);
    CHECK(wrong_across == 0);
  }
}

TEST_CASE("half tensors: the errors a user meets name the op, the types and the fix") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", {4, 4});
  const Tensor h = vkt::cast(x, DType::F16);
  const std::string relu = vkt::test::error_of([&] { vkt::relu(h); });
  CHECK_THAT(relu, Contains("relu") && Contains("f16") && Contains("vkt::cast"));
  const std::string mixed = vkt::test::error_of([&] { vkt::matmul(h, vkt::cast(x, DType::BF16)); });
  CHECK_THAT(mixed, Contains("f16") && Contains("bf16") && Contains("cast"));
  const std::string mixed_f32 = vkt::test::error_of([&] { vkt::matmul(h, x); });
  CHECK_THAT(mixed_f32, Contains("f16") && Contains("f32"));
  const std::string ranks = vkt::test::error_of([&] {
    vkt::matmul(vkt::cast(g.input("x3", {2, 4, 4}), DType::F16), h);
  });
  CHECK_THAT(ranks, Contains("one rank") && Contains("[2, 4, 4]"));
  const std::string batches = vkt::test::error_of([&] {
    vkt::matmul(vkt::cast(g.input("b2", {2, 4, 4}), DType::F16),
                vkt::cast(g.input("b3", {3, 4, 4}), DType::F16));
  });
  CHECK_THAT(batches, Contains("batch dimensions differ"));
  const std::string ints =
      vkt::test::error_of([&] { vkt::cast(g.input("i", {4}, DType::I32), DType::F16); });
  CHECK_THAT(ints, Contains("i32") && Contains("labels"));
  // A half input takes floats (rounded on the host) but not ints.
  const Tensor hin = g.input("hin", {3}, DType::BF16);
  vkt::Executor exec(g, {vkt::cast(hin, DType::F32)});
  const std::vector<std::int32_t> ints_fed{1, 2, 3};
  CHECK_THAT(vkt::test::error_of([&] { exec.feed("hin", ints_fed); }),
             Contains("bf16") && Contains("i32"));
  const std::vector<float> wrong_count{1.0f, 2.0f};
  CHECK_THAT(vkt::test::error_of([&] { exec.feed("hin", wrong_count); }),
             Contains("3 values") && Contains("2 values"));
  // One too many: the padding to whole words must not make it fit.
  const std::vector<float> one_more{1.0f, 2.0f, 3.0f, 4.0f};
  CHECK_THAT(vkt::test::error_of([&] { exec.feed("hin", one_more); }),
             Contains("3 values") && Contains("4 values"));
}
