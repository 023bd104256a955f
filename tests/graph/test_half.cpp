// The half types: host conversions against an independent rounding in double,
// the device's cast against the host's bits, the half matmul (on the tiled
// kernels, as on GPUs, and on the texel kernels) and its gradients against
// double references, and the errors a user meets.
#include <bit>
#include <cmath>
#include <limits>

#include <vktower/runtime/graph/half.h>
#include <vktower/runtime/graph/ops/cast.h>

#include <vktower/vktower.h>

#include "../shared_device.h"
#include "../test_support.h"
#include "matmul_variant_scope.h"

using Catch::Matchers::Contains;
using vkt::DType;
using vkt::Tensor;

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

/// How many of the rows x cols results in `got` lie farther from the double
/// sum over k of left(i, k) * right(k, j) than one rounding to the half type
/// (unit roundoff u) plus f32 sums of `inner` terms allow.
template <typename Left, typename Right>
std::int64_t outside_half_product(const std::vector<float>& got, std::int64_t rows,
                                  std::int64_t inner, std::int64_t cols, double u, Left left,
                                  Right right) {
  std::int64_t outside = 0;
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t j = 0; j < cols; ++j) {
      double sum = 0, magnitude = 0;
      for (std::int64_t k = 0; k < inner; ++k) {
        const double p = left(i, k) * right(k, j);
        sum += p;
        magnitude += std::abs(p);
      }
      const double bound = u * std::abs(sum) + inner * std::ldexp(1.0, -24) * magnitude + 1e-6;
      outside += std::abs(got[static_cast<std::size_t>(i * cols + j)] - sum) > bound;
    }
  }
  return outside;
}

/// The half format's unit roundoff: a result rounded once is this close.
double unit_roundoff(DType half) {
  return half == DType::F16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
}

bool same_bits(float a, float b) {
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
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

TEST_CASE(
    "gradients flow through cast and a half matmul: f32 weights trained in f16 and bf16 get "
    "the double reference's gradients within the half format's rounding") {
  constexpr std::int64_t kM = 9, kK = 13, kN = 7;
  const char* kernels = GENERATE("tiled", "texel");
  const vkt::test::VariantScope scope(kernels);
  for (const DType half : {DType::F16, DType::BF16}) {
    INFO(kernels << " " << vkt::to_string(half));
    const double u = unit_roundoff(half);
    vkt::Graph g(vkt::test::shared_device());
    const Tensor x = g.input("x", {kM, kK});
    const Tensor w = g.input("w", {kK, kN});
    const std::vector<float> cv = vkt::test::random_floats(kM * kN, 3);
    const Tensor y = vkt::cast(vkt::matmul(vkt::cast(x, half), vkt::cast(w, half)), DType::F32);
    // loss = sum(y * c): dy = c, dx = c w^T, dw = x^T c.
    const Tensor loss = vkt::reduce_sum(y * g.constant({kM, kN}, cv));
    const std::vector<vkt::Gradient> grads = vkt::gradients(loss, {x, w});
    CHECK(grads[0].dense.dtype() == DType::F32);
    vkt::Executor exec(g, {grads[0].dense, grads[1].dense});
    const std::vector<float> xv = vkt::test::random_floats(kM * kK, 4);
    const std::vector<float> wv = vkt::test::random_floats(kK * kN, 5);
    exec.feed("x", xv);
    exec.feed("w", wv);
    exec.run();
    const std::vector<float> dx = exec.read(grads[0].dense), dw = exec.read(grads[1].dense);
    // The reference in double from the operands as cast: c (as dy) and x, w
    // are rounded to the half type before the products, as the graph does.
    const auto rounded = [half](const std::vector<float>& v) {
      return vkt::from_half(vkt::to_half(v, half), half);
    };
    const std::vector<float> xh = rounded(xv), wh = rounded(wv), ch = rounded(cv);
    const auto at = [](const std::vector<float>& v, std::int64_t i) -> double {
      return v[static_cast<std::size_t>(i)];
    };
    // dx[i, k] = sum over j of c[i, j] w[k, j]; dw[k, j] = sum over i of x[i, k] c[i, j].
    CHECK(outside_half_product(
              dx, kM, kN, kK, u, [&](std::int64_t i, std::int64_t j) { return at(ch, i * kN + j); },
              [&](std::int64_t j, std::int64_t k) { return at(wh, k * kN + j); }) == 0);
    CHECK(outside_half_product(
              dw, kK, kM, kN, u, [&](std::int64_t k, std::int64_t i) { return at(xh, i * kK + k); },
              [&](std::int64_t i, std::int64_t j) { return at(ch, i * kN + j); }) == 0);
  }
}

TEST_CASE(
    "matmul of f16 and bf16 sums in f32 and rounds once: matrices and batches of rank 3 and 4 "
    "(matrices starting mid-word), every transpose, odd sizes, against a double reference") {
  constexpr std::int64_t kM = 21, kK = 19, kN = 17;  // more than one 16 x 16 tile each way
  // The half kernel (tiled: GPUs), and on CPU devices the texel kernel on
  // the operands widened to f32, rounded once.
  const char* kernels = GENERATE("tiled", "texel");
  const vkt::test::VariantScope scope(kernels);
  for (const std::vector<std::int64_t>& lead :
       {std::vector<std::int64_t>{}, std::vector<std::int64_t>{3}, {2, 3}}) {
    std::int64_t batch = 1;
    for (const std::int64_t d : lead) batch *= d;
    const auto shape = [&](std::int64_t r, std::int64_t c) {
      std::vector<std::int64_t> dims = lead;
      dims.push_back(r);
      dims.push_back(c);
      return vkt::Shape(dims);
    };
    for (const DType half : {DType::F16, DType::BF16}) {
      // The half format's unit roundoff: the result is rounded once.
      const double u = unit_roundoff(half);
      for (const bool ta : {false, true}) {
        for (const bool tb : {false, true}) {
          INFO(kernels << " rank " << lead.size() + 2 << " " << vkt::to_string(half)
                       << (ta ? " A^T" : "") << (tb ? " B^T" : ""));
          vkt::Graph g(vkt::test::shared_device());
          const Tensor a = g.input("a", ta ? shape(kK, kM) : shape(kM, kK), half);
          const Tensor b = g.input("b", tb ? shape(kN, kK) : shape(kK, kN), half);
          const Tensor c = vkt::matmul(a, b, ta, tb);
          CHECK(c.shape() == shape(kM, kN));
          CHECK(c.dtype() == half);
          vkt::Executor exec(g, {c});
          const std::vector<float> av = vkt::from_half(
              vkt::to_half(vkt::test::random_floats(batch * kM * kK, 6, -2.0f, 2.0f), half), half);
          const std::vector<float> bv = vkt::from_half(
              vkt::to_half(vkt::test::random_floats(batch * kK * kN, 7, -2.0f, 2.0f), half), half);
          exec.feed("a", av);
          exec.feed("b", bv);
          exec.run();
          const std::vector<float> got = exec.read(c);
          std::int64_t outside = 0;
          for (std::int64_t z = 0; z < batch; ++z) {
            const std::size_t a0 = static_cast<std::size_t>(z * kM * kK);
            const std::size_t b0 = static_cast<std::size_t>(z * kK * kN);
            const auto c0 = got.begin() + z * kM * kN;
            outside += outside_half_product(
                std::vector<float>(c0, c0 + kM * kN), kM, kK, kN, u,
                [&](std::int64_t i, std::int64_t k) -> double {
                  return av[a0 + static_cast<std::size_t>(ta ? k * kM + i : i * kK + k)];
                },
                [&](std::int64_t k, std::int64_t j) -> double {
                  return bv[b0 + static_cast<std::size_t>(tb ? j * kK + k : k * kN + j)];
                });
          }
          CHECK(outside == 0);
        }
      }
    }
  }
}

TEST_CASE(
    "on the tiled kernels a half matmul has the bits of the f32 tiled kernel on its widened "
    "operands, rounded once: several tiles and slabs, batches, every transpose, split-K") {
  // Past one 64 x 64 tile and one 16-deep slab each way, odd; k = 300 splits
  // a matrix's k in 2 (few output tiles over a long k), as f32's split.
  constexpr std::int64_t kM = 70, kN = 67;
  // The tiled kernels, and no cooperative matrices (a GPU's f16 products
  // would take them): a Device of the test's own.
  vkt::test::shared_device();
  vkt::DeviceOptions options = vkt::DeviceOptions::from_environment();
  options.matmul = vkt::MatmulKernels::Tiled;
  options.disable_cooperative_matrix = true;
  vkt::Device device(*vkt::test::shared_slot().instance, 0, options);
  for (const std::int64_t k : {37, 300}) {
    for (const std::int64_t batch : {1, 3}) {
      const auto shape = [&](std::int64_t r, std::int64_t c) {
        return batch == 1 ? vkt::Shape{r, c} : vkt::Shape{batch, r, c};
      };
      for (const DType half : {DType::F16, DType::BF16}) {
        for (const bool ta : {false, true}) {
          for (const bool tb : {false, true}) {
            INFO("k " << k << " batch " << batch << " " << vkt::to_string(half)
                      << (ta ? " A^T" : "") << (tb ? " B^T" : ""));
            vkt::Graph g(device);
            const Tensor a = g.input("a", ta ? shape(k, kM) : shape(kM, k), half);
            const Tensor b = g.input("b", tb ? shape(kN, k) : shape(k, kN), half);
            const Tensor c = vkt::matmul(a, b, ta, tb);
            CHECK(c.dtype() == half);
            const bool split = k == 300 && batch == 1;
            int split_nodes = 0;
            for (const vkt::Node& node : g.nodes()) {
              split_nodes += node.op->type() == "matmul_split_k";
            }
            CHECK(split_nodes == (split ? 1 : 0));
            const Tensor f32 = vkt::cast(
                vkt::matmul(vkt::cast(a, DType::F32), vkt::cast(b, DType::F32), ta, tb), half);
            // The gradients too (the split's reach a and b through sum_slices).
            const Tensor w =
                g.constant(c.shape(), vkt::test::random_floats(c.shape().elements(), 10));
            const auto grads = [&](const Tensor& y) {
              return vkt::gradients(vkt::reduce_sum(vkt::cast(y, DType::F32) * w), {a, b});
            };
            const std::vector<vkt::Gradient> dc = grads(c), df = grads(f32);
            vkt::Executor exec(g, {c, f32, dc[0].dense, df[0].dense, dc[1].dense, df[1].dense});
            exec.feed("a", vkt::test::random_floats(batch * kM * k, 8, -2.0f, 2.0f));
            exec.feed("b", vkt::test::random_floats(batch * k * kN, 9, -2.0f, 2.0f));
            exec.run();
            for (const auto& [got_t, want_t] :
                 {std::pair{c, f32}, std::pair{dc[0].dense, df[0].dense},
                  std::pair{dc[1].dense, df[1].dense}}) {
              const std::vector<float> got = exec.read(got_t), want = exec.read(want_t);
              REQUIRE(got.size() == want.size());
              std::size_t differ = 0;
              for (std::size_t i = 0; i < got.size(); ++i) differ += !same_bits(got[i], want[i]);
              CHECK(differ == 0);
            }
          }
        }
      }
    }
  }
}

TEST_CASE(
    "under the fp16 policy a batched f32 product runs in half, and its gradients are the "
    "double reference's within the half rounding") {
  constexpr std::int64_t kB = 3, kM = 5, kK = 7, kN = 6;
  const char* kernels = GENERATE("tiled", "texel");
  const vkt::test::VariantScope scope(kernels);
  const double u = unit_roundoff(DType::F16);
  vkt::Graph g(vkt::test::shared_device(), {.precision = vkt::Precision::F16});
  const Tensor x = g.input("x", {kB, kM, kK});
  const Tensor w = g.input("w", {kB, kK, kN});
  const std::vector<float> cv = vkt::test::random_floats(kB * kM * kN, 8);
  const Tensor y = vkt::matmul(x, w);
  CHECK(y.dtype() == DType::F32);
  // Both operands go to f16 first: cast (the half kernel), or rounded in
  // place (the texel kernel).
  std::int64_t operand_casts = 0;
  for (const vkt::Node& node : g.nodes()) {
    const bool reads_operand =
        node.inputs.size() == 1 && (node.inputs[0].id() == x.id() || node.inputs[0].id() == w.id());
    const bool to_half = (node.op->type() == "cast" && node.output.dtype() == DType::F16) ||
                         node.op->type() == "round_f16";
    operand_casts += reads_operand && to_half;
  }
  CHECK(operand_casts == 2);
  const Tensor loss = vkt::reduce_sum(y * g.constant({kB, kM, kN}, cv));
  const std::vector<vkt::Gradient> grads = vkt::gradients(loss, {x, w});
  vkt::Executor exec(g, {grads[0].dense, grads[1].dense});
  const std::vector<float> xv = vkt::test::random_floats(kB * kM * kK, 9);
  const std::vector<float> wv = vkt::test::random_floats(kB * kK * kN, 10);
  exec.feed("x", xv);
  exec.feed("w", wv);
  exec.run();
  const std::vector<float> dx = exec.read(grads[0].dense), dw = exec.read(grads[1].dense);
  const auto rounded = [](const std::vector<float>& v) {
    return vkt::from_half(vkt::to_half(v, DType::F16), DType::F16);
  };
  const std::vector<float> xh = rounded(xv), wh = rounded(wv), ch = rounded(cv);
  std::int64_t outside = 0;
  for (std::int64_t z = 0; z < kB; ++z) {
    const auto at = [z](const std::vector<float>& v, std::int64_t per, std::int64_t i) -> double {
      return v[static_cast<std::size_t>(z * per + i)];
    };
    const auto slice = [z](const std::vector<float>& v, std::int64_t per) {
      return std::vector<float>(v.begin() + z * per, v.begin() + (z + 1) * per);
    };
    // dx[i, k] = sum over j of c[i, j] w[k, j]; dw[k, j] = sum over i of x[i, k] c[i, j].
    outside += outside_half_product(
        slice(dx, kM * kK), kM, kN, kK, u,
        [&](std::int64_t i, std::int64_t j) { return at(ch, kM * kN, i * kN + j); },
        [&](std::int64_t j, std::int64_t k) { return at(wh, kK * kN, k * kN + j); });
    outside += outside_half_product(
        slice(dw, kK * kN), kK, kM, kN, u,
        [&](std::int64_t k, std::int64_t i) { return at(xh, kM * kK, i * kK + k); },
        [&](std::int64_t i, std::int64_t j) { return at(ch, kM * kN, i * kN + j); });
  }
  CHECK(outside == 0);
}

TEST_CASE(
    "on the texel kernel the policy rounds in place: the bits of the explicit casts around a "
    "half product, forward and backward") {
  constexpr std::int64_t kM = 9, kK = 14, kN = 11;
  const vkt::test::VariantScope scope("texel");
  for (const DType half : {DType::F16, DType::BF16}) {
    INFO(vkt::to_string(half));
    const vkt::Precision precision =
        half == DType::F16 ? vkt::Precision::F16 : vkt::Precision::BF16;
    vkt::Graph g(vkt::test::shared_device(), {.precision = precision});
    const Tensor x = g.input("x", {kM, kK});
    const Tensor w = g.input("w", {kN, kK});
    const Tensor c = g.constant({kM, kN}, vkt::test::random_floats(kM * kN, 12));
    const Tensor policy = vkt::matmul(x, w, false, true);  // round_to_half, f32 texel, round
    // Half tensors through the half path (cast, texel kernel, cast).
    const Tensor casts =
        vkt::cast(vkt::matmul(vkt::cast(x, half), vkt::cast(w, half), false, true), DType::F32);
    const std::vector<vkt::Gradient> gp = vkt::gradients(vkt::reduce_sum(policy * c), {x, w});
    const std::vector<vkt::Gradient> gc = vkt::gradients(vkt::reduce_sum(casts * c), {x, w});
    vkt::Executor exec(g, {policy, casts, gp[0].dense, gp[1].dense, gc[0].dense, gc[1].dense});
    // Values that round: most below the half types' resolution, one past
    // f16's range, one in its subnormals.
    std::vector<float> xv = vkt::test::random_floats(kM * kK, 13, -3.0f, 3.0f);
    xv[0] = 70000.0f;
    xv[1] = 1e-6f;
    exec.feed("x", xv);
    exec.feed("w", vkt::test::random_floats(kN * kK, 14, -3.0f, 3.0f));
    exec.run();
    const auto bits = [](const std::vector<float>& v) {
      std::vector<std::uint32_t> out;
      for (const float f : v) out.push_back(std::bit_cast<std::uint32_t>(f));
      return out;
    };
    CHECK(bits(exec.read(policy)) == bits(exec.read(casts)));
    CHECK(bits(exec.read(gp[0].dense)) == bits(exec.read(gc[0].dense)));
    CHECK(bits(exec.read(gp[1].dense)) == bits(exec.read(gc[1].dense)));

    // round_to_half alone (the products' own rounding hides its gradient
    // above): x rounded, and dy rounded on the way back, as the host does.
    vkt::Graph f(vkt::test::shared_device());
    const Tensor v = f.input("v", {kM, kK});
    const std::vector<float> cv = vkt::test::random_floats(kM * kK, 15);
    const Tensor r = vkt::round_to_half(v, half);
    const vkt::Gradient dv = vkt::gradients(vkt::reduce_sum(r * f.constant({kM, kK}, cv)), {v})[0];
    vkt::Executor round_exec(f, {r, dv.dense});
    round_exec.feed("v", xv);
    round_exec.run();
    const auto host = [half](const std::vector<float>& values) {
      return vkt::from_half(vkt::to_half(values, half), half);
    };
    CHECK(bits(round_exec.read(r)) == bits(host(xv)));
    CHECK(bits(round_exec.read(dv.dense)) == bits(host(cv)));
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
