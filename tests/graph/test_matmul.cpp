// matmul (both kernel variants, all transpose flags), bias_add and
// layers::dense against double-precision CPU references (see op_check.h).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>

#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/matmul.h>
#include <vktower/runtime/graph/ops/texel_view.h>

#include "../test_support.h"
#include "activation_reference.h"
#include "matmul_variant_scope.h"
#include "op_check.h"

using vkt::MatmulVariant;
using vkt::Shape;
using vkt::Tensor;
using vkt::test::matmul_reference;
using vkt::test::OpSpec;
using vkt::test::Values;

using vkt::test::VariantScope;

namespace {

using Dims = vkt::test::MatmulDims;

Shape a_shape(Dims d, bool ta) {
  return ta ? Shape{d.k, d.m} : Shape{d.m, d.k};
}
Shape b_shape(Dims d, bool tb) {
  return tb ? Shape{d.n, d.k} : Shape{d.k, d.n};
}

const char* variant_name(MatmulVariant v) {
  return v == MatmulVariant::Texel ? "texel" : "tiled";
}

/// Forward values and both gradients of every transpose combination at `sizes`.
void check_matmul(const char* variant, const std::vector<Dims>& sizes) {
  const VariantScope scope(variant);
  REQUIRE(std::string(variant_name(vkt::matmul_variant(vkt::test::shared_device()))) == variant);
  for (const Dims d : sizes) {
    for (int flags = 0; flags < 4; ++flags) {
      const bool ta = flags & 1, tb = flags & 2;
      OpSpec spec{
          .name = fmt::format("{} matmul M={} K={} N={} transpose_a={} transpose_b={}", variant,
                              d.m, d.k, d.n, ta, tb),
          .shapes = {a_shape(d, ta), b_shape(d, tb)},
          .build = [&](const std::vector<Tensor>& in) { return vkt::matmul(in[0], in[1], ta, tb); },
          .reference =
              [&](const std::vector<Values>& in) {
                return matmul_reference(in[0], in[1], d, ta, tb);
              },
          // Sums of up to 1000 float products: the error grows with K.
          .forward_tolerance = d.k > 200 ? 1e-4 : 1e-5,
      };
      vkt::test::check_op(spec, static_cast<std::uint32_t>(d.m * 131 + d.k * 7 + d.n + flags));
    }
  }
}

// Each size 1, 7, 33, 127 and 1000 along each of M, K and N somewhere; K not a
// multiple of 4 (partial last texel step) and row lengths that make texels
// straddle rows; one case where every row length is a multiple of 4.
const std::vector<Dims> kSmall = {{1, 1, 1}, {7, 5, 33}, {33, 7, 5}, {8, 12, 16}, {33, 33, 33}};
const std::vector<Dims> kOdd = {{5, 127, 7}, {6, 9, 127}, {127, 6, 9}};
const std::vector<Dims> kLong = {{3, 1000, 2}, {2, 3, 1000}, {1000, 3, 2}};
// At most 16 columns over many rows: the texel kernel puts 4 lanes across and
// 4 on the next rows (texel_view.h); M not a multiple of the 32 rows that
// makes, so a workgroup's second row block may lie past M.
const std::vector<Dims> kTallNarrow = {{500, 2, 13}, {497, 3, 16}, {513, 2, 1}};

}  // namespace

TEST_CASE(
    "matmul variant: lavapipe picks texel, VKT_MATMUL_VARIANT overrides where a Device is made") {
  vkt::Device& device = vkt::test::shared_device();
  {
    const VariantScope scope("auto");
    CHECK(vkt::matmul_variant(device) ==
          (device.info().is_lavapipe ? MatmulVariant::Texel : MatmulVariant::Tiled));
  }
  {
    const VariantScope scope("tiled");
    CHECK(vkt::matmul_variant(device) == MatmulVariant::Tiled);
  }
  {
    const VariantScope scope("texel");
    CHECK(vkt::matmul_variant(device) == MatmulVariant::Texel);
  }
  {
    const vkt::test::EnvScope env("VKT_MATMUL_VARIANT", "tiled");
    CHECK(vkt::DeviceOptions::from_environment().matmul == vkt::MatmulKernels::Tiled);
    // Read when the options are made, not when a step is recorded.
    const vkt::DeviceOptions options = vkt::DeviceOptions::from_environment();
    env.set("texel");
    vkt::Device made(*vkt::test::shared_slot().instance, 0, options);
    CHECK(vkt::matmul_variant(made) == MatmulVariant::Tiled);
  }
  const vkt::test::EnvScope env("VKT_MATMUL_VARIANT", "fastest");
  const std::string message =
      vkt::test::error_of([&] { (void)vkt::DeviceOptions::from_environment(); });
  CHECK_THAT(message,
             Catch::Contains("VKT_MATMUL_VARIANT='fastest'") && Catch::Contains("tiled, texel"));
}

TEST_CASE("matmul tiled kernel: small and odd sizes, all transpose flags, gradients") {
  check_matmul("tiled", kSmall);
  check_matmul("tiled", kOdd);
}

TEST_CASE("matmul tiled kernel: a dimension of 1000, all transpose flags, gradients") {
  check_matmul("tiled", kLong);
}

TEST_CASE("matmul texel kernel: small sizes, all transpose flags, gradients") {
  check_matmul("texel", kSmall);
}

TEST_CASE("matmul texel kernel: odd sizes, all transpose flags, gradients") {
  check_matmul("texel", kOdd);
}

TEST_CASE("matmul texel kernel: a dimension of 1000, all transpose flags, gradients") {
  check_matmul("texel", kLong);
}

TEST_CASE("the texel kernels' block and grid for each kind of output") {
  using vkt::matmul_detail::texel_block;
  struct Expected {
    std::uint32_t m, n, rm, rn4, lanes_n, groups_x, groups_y;
    std::optional<std::uint32_t> fixed_rm = {};
  };
  for (const Expected e : std::vector<Expected>{
           {1024, 1024, 16, 4, 8, 8, 64},  // the fastest block: 16 rows x 8 lanes x 16 columns
           {5, 1024, 8, 4, 8, 8, 1},       // short: 8-row blocks
           {256, 40, 16, 2, 8, 1, 16},     // 33-64 columns: 2 texels a lane
           {256, 10, 16, 1, 8, 1, 16},     // narrow, but too few row blocks to split
           {511, 16, 16, 1, 4, 1, 16},     // 32 row blocks: split, 16 workgroups of 32 rows
           {496, 16, 16, 1, 8, 1, 31},     // 31 row blocks: 8 lanes across
           {12544, 16, 16, 1, 4, 1, 392},  // vkt-mnist's first conv: 4 lanes across, 4 down
           {12544, 17, 16, 1, 8, 1, 784},  // 17 columns: no split
           {12544, 32, 16, 1, 8, 1, 784},
           {25, 16, 16, 1, 8, 1, 2, 16},  // a filter gradient's few rows (conv: rm fixed)
       }) {
    INFO("M=" << e.m << " N=" << e.n);
    const auto b = texel_block(e.m, e.n, e.fixed_rm);
    CHECK(b.rm == e.rm);
    CHECK(b.rn4 == e.rn4);
    CHECK(b.lanes_n == e.lanes_n);
    CHECK(b.groups_x == e.groups_x);
    CHECK(b.groups_y == e.groups_y);
    CHECK(b.suffix() == fmt::format("r{}c{}", e.rm, e.rn4));
    CHECK(b.lanes_constant().id == 1);
    CHECK(b.lanes_constant().bits == e.lanes_n);
  }
}

TEST_CASE("matmul texel kernel: tall and narrow, 4 lanes across, all transpose flags, gradients") {
  check_matmul("texel", kTallNarrow);
}

TEST_CASE("matmul: many workgroups in both dimensions, NaN in the operands' padding") {
  const char* variant = GENERATE("tiled", "texel");
  const VariantScope scope(variant);
  // Several tiles (64 x 64) and texel blocks (16 x 128) along M and N, with
  // ragged edges; K = 131 is odd, so the last k step is partial.
  const Dims d{150, 131, 270};
  vkt::Device& device = vkt::test::shared_device();
  for (int flags = 0; flags < 4; ++flags) {
    const bool ta = flags & 1, tb = flags & 2;
    INFO(variant << " transpose_a=" << ta << " transpose_b=" << tb);
    vkt::Graph g(device);
    const Tensor a = g.input("a", a_shape(d, ta));
    const Tensor b = g.input("b", b_shape(d, tb));
    const Tensor c = vkt::matmul(a, b, ta, tb);
    vkt::Executor exec(g, {c});
    const std::vector<float> av = vkt::test::random_floats(d.m * d.k, 11 + flags);
    const std::vector<float> bv = vkt::test::random_floats(d.k * d.n, 23 + flags);
    exec.feed("a", av);
    exec.feed("b", bv);
    // Texel reads cover whole 16-byte texels, so they see the bytes after an
    // operand's last element; a kernel that lets them reach a stored output
    // (instead of masking them) turns that output into NaN.
    for (const Tensor& t : {a, b}) {
      const vkt::BufferRange r = exec.range(t);
      REQUIRE(r.size() % 16 != 0);  // 150 x 131 and 131 x 270 leave a partial texel
      const std::size_t end = vkt::align_up(r.offset + r.size(), 16);
      const std::vector<float> nans((end - r.offset - r.size()) / 4,
                                    std::numeric_limits<float>::quiet_NaN());
      // upload(), not the host view: a discrete GPU's buffers are not mapped.
      const_cast<vkt::Buffer*>(r.buffer)->upload(nans, r.offset + r.size());
    }
    exec.run();
    const std::vector<float> got = exec.read(c);
    const Values want =
        matmul_reference(Values(av.begin(), av.end()), Values(bv.begin(), bv.end()), d, ta, tb);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      if (!vkt::test::close_enough(got[i], want[i], 1e-5) && wrong++ < 5) {
        UNSCOPED_INFO("c[" << i / d.n << "][" << i % d.n << "] = " << got[i] << ", expected "
                           << want[i]);
      }
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("matmul shape errors name the op, both tensors and both shapes") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", {32, 784});
  const Tensor w = g.input("w", {100, 10});
  CHECK_THAT(vkt::test::error_of([&] { vkt::matmul(x, w); }),
             Catch::StartsWith("matmul('x', 'w'): inner dimensions differ: [32, 784] x [100, 10]"));
  // With transpose_b, w [100, 10] is read as [10, 100]: K = 10 against 784.
  CHECK_THAT(vkt::test::error_of([&] { vkt::matmul(x, w, false, true); }),
             Catch::Contains("matmul('x', 'w', transpose_b)") &&
                 Catch::Contains("[32, 784] x [100, 10]^T (784 vs 10)"));
  // transpose_a makes x [784, 32]: K = 32 against 100.
  CHECK_THAT(vkt::test::error_of([&] { vkt::matmul(x, w, true, false); }),
             Catch::Contains("[32, 784]^T x [100, 10] (32 vs 100)"));
  const Tensor v = g.input("v", {784});
  CHECK_THAT(vkt::test::error_of([&] { vkt::matmul(x, v); }),
             Catch::Contains("matmul('x', 'v')") && Catch::Contains("rank 2") &&
                 Catch::Contains("[32, 784] x [784]"));
  const Tensor ids = g.input("ids", {784, 10}, vkt::DType::I32);
  CHECK_THAT(vkt::test::error_of([&] { vkt::matmul(x, ids); }), Catch::Contains("'ids' holds i32"));
  vkt::Graph other(vkt::test::shared_device());
  const Tensor y = other.input("y", {784, 10});
  CHECK_THAT(vkt::test::error_of([&] { vkt::matmul(x, y); }), Catch::Contains("different graphs"));
  // The right shapes with the right flags build: the output shape is checked.
  CHECK(vkt::matmul(g.input("p", {784, 10}), x, true, true).shape() == Shape{10, 32});
  CHECK(vkt::matmul(x, g.input("k", {10, 784}), false, true).shape() == Shape{32, 10});
}

TEST_CASE("bias_add: forward and gradients, the bias gradient summed over rows") {
  const auto shapes = GENERATE(std::pair{Shape{7, 33}, Shape{33}}, std::pair{Shape{1, 1}, Shape{1}},
                               std::pair{Shape{2, 3, 5}, Shape{5}},
                               std::pair{Shape{127, 9}, Shape{9}}, std::pair{Shape{6}, Shape{6}});
  const Shape xs = shapes.first, bs = shapes.second;
  OpSpec spec{
      .name = fmt::format("bias_add {} + {}", xs.str(), bs.str()),
      .shapes = {xs, bs},
      .build = [](const std::vector<Tensor>& in) { return vkt::bias_add(in[0], in[1]); },
      .reference =
          [&](const std::vector<Values>& in) {
            Values y(in[0]);
            for (std::size_t i = 0; i < y.size(); ++i) y[i] += in[1][i % in[1].size()];
            return y;
          },
  };
  vkt::test::check_op(spec, 9);
}

TEST_CASE("bias_add shape errors") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", {4, 10});
  CHECK_THAT(vkt::test::error_of([&] { vkt::bias_add(x, g.input("b", {4})); }),
             Catch::Contains("bias_add('x', 'b')") && Catch::Contains("x [4, 10] and bias [4]"));
  CHECK_THAT(vkt::test::error_of([&] {
               vkt::bias_add(x, g.input("b2", {1, 10}));
             }),
             Catch::Contains("bias [1, 10]"));
}

namespace {

using vkt::layers::Activation;

/// act(x W + b) in double, from the values the device holds.
Values dense_reference(const std::vector<float>& x, const std::vector<float>& w,
                       const std::vector<float>& b, std::int64_t rows, std::int64_t in,
                       std::int64_t units, Activation act) {
  Values y(static_cast<std::size_t>(rows * units));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t u = 0; u < units; ++u) {
      double z = b[static_cast<std::size_t>(u)];
      for (std::int64_t i = 0; i < in; ++i) {
        z += double(x[static_cast<std::size_t>(r * in + i)]) *
             w[static_cast<std::size_t>(i * units + u)];
      }
      y[static_cast<std::size_t>(r * units + u)] = vkt::test::activation_reference(act, z);
    }
  }
  return y;
}

std::size_t count_wrong(const std::vector<float>& got, const Values& want, double tolerance) {
  REQUIRE(got.size() == want.size());
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!vkt::test::close_enough(got[i], want[i], tolerance) && wrong++ < 5) {
      UNSCOPED_INFO("[" << i << "] = " << got[i] << ", expected " << want[i]);
    }
  }
  return wrong;
}

}  // namespace

TEST_CASE("layers::dense: variables, and values of every activation against a CPU layer") {
  const std::vector<Activation> acts = {
      Activation::None, Activation::Relu, Activation::Sigmoid,   Activation::Tanh,
      Activation::Gelu, Activation::Elu,  Activation::LeakyRelu, Activation::Softplus};
  vkt::Graph g(vkt::test::shared_device(), {.seed = 7});
  const std::int64_t rows = 5, in = 7, units = 3;
  const Tensor x = g.input("x", {rows, in});
  std::vector<Tensor> ys;
  for (std::size_t a = 0; a < acts.size(); ++a) {
    ys.push_back(vkt::layers::dense(x, units, acts[a], fmt::format("d{}", a)));
    CHECK(ys.back().shape() == Shape{rows, units});
  }
  // [2, 3, 7] is folded to [6, 7] and back.
  const Tensor x3 = g.input("x3", {2, 3, in});
  const Tensor y3 = vkt::layers::dense(x3, 4, Activation::None, "folded");
  CHECK(y3.shape() == Shape{2, 3, 4});
  const auto kernel = g.find_variable("d0/kernel"), bias = g.find_variable("d0/bias");
  REQUIRE(kernel);
  REQUIRE(bias);
  CHECK(kernel->shape() == Shape{in, units});
  CHECK(bias->shape() == Shape{units});
  // The same name reuses the variables; another input width clashes with them.
  const std::size_t variables = g.variables().size();
  vkt::layers::dense(x, units, Activation::Relu, "d0");
  CHECK(g.variables().size() == variables);
  CHECK_THAT(vkt::test::error_of([&] {
               vkt::layers::dense(g.input("narrow", {rows, 4}), units, Activation::None, "d0");
             }),
             Catch::Contains("d0/kernel"));

  // Bias zeros at first; give each layer its own so that adding it is checked.
  for (std::size_t a = 0; a < acts.size(); ++a) {
    const Tensor b = *g.find_variable(fmt::format("d{}/bias", a));
    CHECK(g.values(b) == std::vector<float>(units, 0.0f));
    g.assign(b, vkt::test::random_floats(units, 100 + static_cast<std::uint32_t>(a)));
  }
  const std::vector<float> w0 = g.values(*kernel);
  const float limit = std::sqrt(6.0f / (in + units));  // glorot_uniform
  CHECK(std::all_of(w0.begin(), w0.end(), [&](float w) { return std::abs(w) <= limit; }));
  CHECK(*std::max_element(w0.begin(), w0.end()) > 0.3f * limit);
  CHECK(g.values(*g.find_variable("d1/kernel")) != w0);  // seeded by name

  std::vector<Tensor> fetches = ys;
  fetches.push_back(y3);
  vkt::Executor exec(g, fetches);
  const std::vector<float> xv = vkt::test::random_floats(rows * in, 5, -2.0f, 2.0f);
  const std::vector<float> x3v = vkt::test::random_floats(6 * in, 6);
  exec.feed("x", xv);
  exec.feed("x3", x3v);
  exec.run();
  for (std::size_t a = 0; a < acts.size(); ++a) {
    INFO("activation " << a);
    const std::string name = fmt::format("d{}", a);
    const Values want =
        dense_reference(xv, g.values(*g.find_variable(name + "/kernel")),
                        g.values(*g.find_variable(name + "/bias")), rows, in, units, acts[a]);
    CHECK(count_wrong(exec.read(ys[a]), want, 1e-5) == 0);
  }
  const Values want3 =
      dense_reference(x3v, g.values(*g.find_variable("folded/kernel")),
                      g.values(*g.find_variable("folded/bias")), 6, in, 4, Activation::None);
  CHECK(count_wrong(exec.read(y3), want3, 1e-5) == 0);
}

TEST_CASE("layers::dense: gradients of kernel and bias against the CPU") {
  vkt::Graph g(vkt::test::shared_device(), {.seed = 3});
  const std::int64_t rows = 9, in = 6, units = 5;
  const Tensor x = g.input("x", {rows, in});
  const Tensor y = vkt::layers::dense(x, units, Activation::Tanh, "layer");
  const std::vector<float> wv = vkt::test::random_floats(rows * units, 8);
  const Tensor loss = vkt::reduce_sum(y * g.constant(y.shape(), wv));
  const Tensor kernel = *g.find_variable("layer/kernel"), bias = *g.find_variable("layer/bias");
  const std::vector<vkt::Gradient> grads = vkt::gradients(loss, {kernel, bias});
  g.assign(bias, vkt::test::random_floats(units, 9));
  vkt::Executor exec(g, {y, grads[0].dense, grads[1].dense});
  const std::vector<float> xv = vkt::test::random_floats(rows * in, 10);
  exec.feed("x", xv);
  exec.run();
  // L = sum w * tanh(z): dL/dz = w (1 - y^2); dK = x^T dz, db = the column sums of dz.
  const Values yv =
      dense_reference(xv, g.values(kernel), g.values(bias), rows, in, units, Activation::Tanh);
  Values dk(static_cast<std::size_t>(in * units), 0.0), db(static_cast<std::size_t>(units), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t u = 0; u < units; ++u) {
      const std::size_t ru = static_cast<std::size_t>(r * units + u);
      const double dz = wv[ru] * (1 - yv[ru] * yv[ru]);
      db[static_cast<std::size_t>(u)] += dz;
      for (std::int64_t i = 0; i < in; ++i) {
        dk[static_cast<std::size_t>(i * units + u)] +=
            xv[static_cast<std::size_t>(r * in + i)] * dz;
      }
    }
  }
  CHECK(count_wrong(exec.read(y), yv, 1e-5) == 0);
  CHECK(count_wrong(exec.read(grads[0].dense), dk, 1e-4) == 0);
  CHECK(count_wrong(exec.read(grads[1].dense), db, 1e-4) == 0);
}

TEST_CASE("layers::dense errors") {
  vkt::Graph g(vkt::test::shared_device());
  CHECK_THAT(vkt::test::error_of([&] { vkt::layers::dense(g.input("v", {7}), 3); }),
             Catch::Contains("dense 'dense'") && Catch::Contains("[7]"));
  CHECK_THAT(vkt::test::error_of([&] {
               vkt::layers::dense(g.input("x", {2, 7}), 0);
             }),
             Catch::Contains("units must be positive"));
}
