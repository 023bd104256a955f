// The batched matmul (rank-3 operands of vkt::matmul): both kernel variants,
// every transpose combination, forward values and both gradients against a
// double-precision CPU reference and finite differences (op_check.h).
#include <fmt/format.h>

#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <vktower/runtime/graph/ops/matmul.h>

#include "../test_support.h"
#include "matmul_variant_scope.h"
#include "op_check.h"

using vkt::MatmulVariant;
using vkt::Shape;
using vkt::Tensor;
using vkt::test::OpSpec;
using vkt::test::Values;

using vkt::test::VariantScope;

namespace {

struct Dims {
  std::int64_t batch, m, k, n;
};

Shape a_shape(Dims d, bool ta) {
  return ta ? Shape{d.batch, d.k, d.m} : Shape{d.batch, d.m, d.k};
}
Shape b_shape(Dims d, bool tb) {
  return tb ? Shape{d.batch, d.n, d.k} : Shape{d.batch, d.k, d.n};
}

/// op(a[i]) op(b[i]) for every i, in double, the operands stored as their shapes say.
Values batch_matmul_reference(const Values& a, const Values& b, Dims d, bool ta, bool tb) {
  Values c(static_cast<std::size_t>(d.batch * d.m * d.n), 0.0);
  for (std::int64_t s = 0; s < d.batch; ++s) {
    const std::int64_t a0 = s * d.m * d.k, b0 = s * d.k * d.n, c0 = s * d.m * d.n;
    for (std::int64_t i = 0; i < d.m; ++i) {
      for (std::int64_t p = 0; p < d.k; ++p) {
        const double x = a[static_cast<std::size_t>(a0 + (ta ? p * d.m + i : i * d.k + p))];
        for (std::int64_t j = 0; j < d.n; ++j) {
          c[static_cast<std::size_t>(c0 + i * d.n + j)] +=
              x * b[static_cast<std::size_t>(b0 + (tb ? j * d.k + p : p * d.n + j))];
        }
      }
    }
  }
  return c;
}

/// Forward values and both gradients of every transpose combination at `d`.
void check_batch_matmul(const char* variant, Dims d) {
  const VariantScope scope(variant);
  const MatmulVariant want =
      std::string(variant) == "texel" ? MatmulVariant::Texel : MatmulVariant::Tiled;
  REQUIRE(vkt::matmul_variant(vkt::test::shared_device()) == want);
  for (int flags = 0; flags < 4; ++flags) {
    const bool ta = flags & 1, tb = flags & 2;
    OpSpec spec{
        .name = fmt::format("{} batched matmul B={} M={} K={} N={} transpose_a={} transpose_b={}",
                            variant, d.batch, d.m, d.k, d.n, ta, tb),
        .shapes = {a_shape(d, ta), b_shape(d, tb)},
        .build =
            [&](const std::vector<Tensor>& in) {
              const Tensor c = vkt::matmul(in[0], in[1], ta, tb);
              REQUIRE(c.shape() == Shape{d.batch, d.m, d.n});
              return c;
            },
        .reference =
            [&](const std::vector<Values>& in) {
              return batch_matmul_reference(in[0], in[1], d, ta, tb);
            },
    };
    vkt::test::check_op(spec, static_cast<std::uint32_t>(d.batch * 977 + d.m * 131 + flags));
  }
}

// Odd sizes: no row length a multiple of 4, so texels straddle rows and
// matrices, and the last k step is partial.
constexpr Dims kOdd{3, 5, 7, 9};
// More than one block along M and N (texel: 16 rows x 128 columns; tiled:
// 64 x 64), and row lengths in whole texels along K. Each variant gets its own
// sizes, so that the finite differences stay cheap.
constexpr Dims kTexelBlocks{2, 17, 4, 129};
constexpr Dims kTiledBlocks{2, 65, 4, 66};

}  // namespace

TEST_CASE(
    "batch_matmul texel kernel: odd sizes and several blocks, all transpose flags, "
    "gradients",
    "[batch_matmul]") {
  check_batch_matmul("texel", kOdd);
  check_batch_matmul("texel", kTexelBlocks);
  check_batch_matmul("texel", Dims{1, 1, 1, 1});
}

TEST_CASE(
    "batch_matmul tiled kernel: odd sizes and several blocks, all transpose flags, "
    "gradients",
    "[batch_matmul]") {
  check_batch_matmul("tiled", kOdd);
  check_batch_matmul("tiled", kTiledBlocks);
  check_batch_matmul("tiled", Dims{1, 1, 1, 1});
}

TEST_CASE("batch_matmul: matrices read past their end see the next one or NaN padding",
          "[batch_matmul]") {
  const char* variant = GENERATE("tiled", "texel");
  const VariantScope scope(variant);
  // K = 131: a partial last k step, whose texels hold the next matrix's first
  // elements (or, for the last one, the padding after the operand).
  const Dims d{3, 70, 131, 150};
  vkt::Device& device = vkt::test::shared_device();
  for (int flags = 0; flags < 4; ++flags) {
    const bool ta = flags & 1, tb = flags & 2;
    INFO(variant << " transpose_a=" << ta << " transpose_b=" << tb);
    vkt::Graph g(device);
    const Tensor a = g.input("a", a_shape(d, ta));
    const Tensor b = g.input("b", b_shape(d, tb));
    const Tensor c = vkt::matmul(a, b, ta, tb);
    vkt::Executor exec(g, {c});
    const std::vector<float> av = vkt::test::random_floats(d.batch * d.m * d.k, 31 + flags);
    const std::vector<float> bv = vkt::test::random_floats(d.batch * d.k * d.n, 47 + flags);
    exec.feed("a", av);
    exec.feed("b", bv);
    // A NaN read that reached a stored output (instead of being masked)
    // would make that output NaN.
    for (const Tensor& t : {a, b}) {
      const vkt::BufferRange r = exec.range(t);
      REQUIRE(r.size() % 16 != 0);
      const std::size_t end = vkt::align_up(r.offset + r.size(), 16);
      const std::vector<float> nans((end - r.offset - r.size()) / 4,
                                    std::numeric_limits<float>::quiet_NaN());
      // upload(), not the host view: a discrete GPU's buffers are not mapped.
      const_cast<vkt::Buffer*>(r.buffer)->upload(nans, r.offset + r.size());
    }
    exec.run();
    const std::vector<float> got = exec.read(c);
    const Values want = batch_matmul_reference(Values(av.begin(), av.end()),
                                               Values(bv.begin(), bv.end()), d, ta, tb);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      if (!vkt::test::close_enough(got[i], want[i], 1e-5) && wrong++ < 5) {
        UNSCOPED_INFO("c[" << i << "] = " << got[i] << ", expected " << want[i]);
      }
    }
    CHECK(wrong == 0);
  }
}

// Texel only: the tiled kernel's 65536 workgroups of 256 invocations take some
// 20 s on lavapipe. Both variants split the batch in the same host loop, and
// their shaders add batch0 alike.
TEST_CASE("batch_matmul: a batch past the device's workgroup count in z", "[batch_matmul]") {
  const VariantScope scope("texel");
  vkt::Device& device = vkt::test::shared_device();
  // One more batch than one dispatch holds: the last matrix is in a second one.
  const std::int64_t batch = std::int64_t{device.limits().maxComputeWorkGroupCount[2]} + 1;
  vkt::Graph g(device);
  const Tensor a = g.input("a", {batch, 1, 2});
  const Tensor b = g.input("b", {batch, 2, 1});
  const Tensor c = vkt::matmul(a, b);
  vkt::Executor exec(g, {c});
  const std::vector<float> av = vkt::test::random_floats(static_cast<std::size_t>(2 * batch), 5);
  const std::vector<float> bv = vkt::test::random_floats(static_cast<std::size_t>(2 * batch), 6);
  exec.feed("a", av);
  exec.feed("b", bv);
  exec.run();
  const std::vector<float> got = exec.read(c);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double want = double(av[2 * i]) * bv[2 * i] + double(av[2 * i + 1]) * bv[2 * i + 1];
    if (!vkt::test::close_enough(got[i], want, 1e-6) && wrong++ < 5) {
      UNSCOPED_INFO("c[" << i << "] = " << got[i] << ", expected " << want);
    }
  }
  CHECK(wrong == 0);
}

TEST_CASE("matmul of rank-5 operands: three batch axes folded into one, gradients",
          "[batch_matmul]") {
  const Dims d{2 * 3 * 2, 4, 5, 3};
  for (const bool tb : {false, true}) {
    const OpSpec spec{
        .name = fmt::format("rank-5 matmul transpose_b={}", tb),
        .shapes = {Shape{2, 3, 2, 4, 5}, tb ? Shape{2, 3, 2, 3, 5} : Shape{2, 3, 2, 5, 3}},
        .build =
            [&](const std::vector<Tensor>& in) {
              const Tensor c = vkt::matmul(in[0], in[1], false, tb);
              REQUIRE(c.shape() == Shape{2, 3, 2, 4, 3});
              return c;
            },
        .reference =
            [&](const std::vector<Values>& in) {
              return batch_matmul_reference(in[0], in[1], d, false, tb);
            }};
    vkt::test::check_op(spec, 7);
  }
  vkt::Graph g(vkt::test::shared_device());
  CHECK_THAT(vkt::test::error_of([&] {
               vkt::matmul(g.input("a", {2, 3, 1, 4, 5}), g.input("b", {2, 4, 1, 5, 3}));
             }),
             Catch::Contains("matmul('a', 'b'): the batch dimensions differ") &&
                 Catch::Contains("same leading 3 dimensions"));
}

TEST_CASE("batch_matmul shape errors name the op, both tensors and both shapes", "[batch_matmul]") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", {3, 5, 7});
  const Tensor y = g.input("y", {4, 7, 9});
  CHECK_THAT(vkt::test::error_of([&] { vkt::matmul(x, y); }),
             Catch::StartsWith("matmul('x', 'y'): batch dimensions differ: [3, 5, 7] x [4, 7, 9] "
                               "(3 vs 4)"));
  const Tensor z = g.input("z", {3, 8, 9});
  CHECK_THAT(vkt::test::error_of([&] { vkt::matmul(x, z); }),
             Catch::StartsWith("matmul('x', 'z'): inner dimensions differ: [3, 5, 7] x [3, 8, 9] "
                               "(7 vs 8)"));
  // transpose_a reads x as [3, 7, 5]: K = 5 against 8.
  CHECK_THAT(vkt::test::error_of([&] { vkt::matmul(x, z, true, false); }),
             Catch::Contains("matmul('x', 'z', transpose_a)") &&
                 Catch::Contains("[3, 5, 7]^T x [3, 8, 9] (5 vs 8)"));
  // Rank 3 beside rank 2, either way round: reshape or broadcast.
  const Tensor w = g.input("w", {7, 9});
  for (const auto& [l, r] : {std::pair{x, w}, std::pair{w, y}}) {
    const std::string message = vkt::test::error_of([&] { vkt::matmul(l, r); });
    CHECK_THAT(message,
               Catch::Contains(fmt::format("matmul('{}', '{}')", l.name(), r.name())) &&
                   Catch::Contains(fmt::format("{} x {}", l.shape().str(), r.shape().str())) &&
                   Catch::Contains("reshape") && Catch::Contains("broadcast"));
  }
  CHECK_THAT(vkt::test::error_of([&] { vkt::matmul(x, g.input("v", {7})); }),
             Catch::Contains("rank 3") && Catch::Contains("[3, 5, 7] x [7]"));
  CHECK_THAT(vkt::test::error_of([&] {
               vkt::matmul(x, g.input("t", {3, 7, 9, 1}));
             }),
             Catch::Contains("rank 3") && Catch::Contains("[3, 5, 7] x [3, 7, 9, 1]"));
  CHECK_THAT(vkt::test::error_of([&] {
               vkt::matmul(x, g.input("ids", {3, 7, 9}, vkt::DType::I32));
             }),
             Catch::Contains("'ids' holds i32"));
  vkt::Graph other(vkt::test::shared_device());
  CHECK_THAT(vkt::test::error_of([&] {
               vkt::matmul(x, other.input("o", {3, 7, 9}));
             }),
             Catch::Contains("different graphs"));
  // The right shapes with the right flags build: the output shape is checked.
  CHECK(vkt::matmul(x, g.input("p", {3, 9, 7}), false, true).shape() == Shape{3, 5, 9});
  CHECK(vkt::matmul(g.input("q", {3, 7, 5}), g.input("r", {3, 8, 7}), true, true).shape() ==
        Shape{3, 5, 8});
}
