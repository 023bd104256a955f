// The half matmul: on the tiled kernels (GPUs' kernels) and on the texel
// kernels, matrices and batches, every transpose, split-K, against double
// references and against the f32 kernels' bits; its gradients; the precision
// policy's products.
#include <cmath>
#include <string>
#include <utility>

#include <vktower/runtime/graph/half.h>
#include <vktower/runtime/graph/ops/cast.h>
#include <vktower/vktower.h>

#include "../log_capture.h"
#include "../shared_device.h"
#include "../test_support.h"
#include "matmul_variant_scope.h"

using vkt::DType;
using vkt::Tensor;
using vkt::test::float_bits;
using vkt::test::same_bits;

namespace {

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

}  // namespace

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
      return vkt::test::rounded_to_half(v, half);
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
  // Which kernels the Device builds (it is new: each once, logged at debug).
  const vkt::test::LogCapture built(spdlog::level::debug, 4096);
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
  CHECK(built.said("kernel 'matmul_half_tiled' built"));
  CHECK(built.said("kernel 'matmul_half_tiled_split' built"));
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
    return vkt::test::rounded_to_half(v, DType::F16);
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
    CHECK(float_bits(exec.read(policy)) == float_bits(exec.read(casts)));
    CHECK(float_bits(exec.read(gp[0].dense)) == float_bits(exec.read(gc[0].dense)));
    CHECK(float_bits(exec.read(gp[1].dense)) == float_bits(exec.read(gc[1].dense)));

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
      return vkt::test::rounded_to_half(values, half);
    };
    CHECK(float_bits(round_exec.read(r)) == float_bits(host(xv)));
    CHECK(float_bits(round_exec.read(dv.dense)) == float_bits(host(cv)));
  }
}
