// max_pool2d, avg_pool2d, global_avg_pool and flatten: forward values and
// gradients against a double-precision CPU reference and finite differences
// (op_check.h) on odd image sizes, ties in max pooling, padding that must never
// win, and the build-time errors.
#include <fmt/format.h>

#include <algorithm>

#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/pool.h>
#include <vktower/runtime/graph/ops/shape_ops.h>

#include "../test_support.h"
#include "op_check.h"

using Catch::Matchers::Contains;
using vkt::Padding;
using vkt::Pool2dOptions;
using vkt::Shape;
using vkt::Tensor;
using vkt::test::OpSpec;
using vkt::test::Values;

namespace {

/// The window geometry, worked out here independently of plan_window.
struct Geometry {
  std::int64_t n, h, w, c, oh, ow, kh, kw, sh, sw, pt, pl;
};

/// Output size and leading padding along one axis.
std::pair<std::int64_t, std::int64_t> axis_plan(std::int64_t in, std::int64_t k, std::int64_t s,
                                                Padding padding, std::int64_t before,
                                                std::int64_t after) {
  if (padding == Padding::Same) {
    const std::int64_t out = (in + s - 1) / s;
    const std::int64_t total = std::max<std::int64_t>((out - 1) * s + k - in, 0);
    return {out, total / 2};  // TensorFlow puts the odd row at the end
  }
  if (padding == Padding::Valid) before = after = 0;
  return {(in + before + after - k) / s + 1, before};
}

Geometry geometry(const Shape& x, const Pool2dOptions& o) {
  const auto& p = o.explicit_padding;
  const auto rows = axis_plan(x[1], o.window[0], o.strides[0], o.padding, p[0], p[1]);
  const auto cols = axis_plan(x[2], o.window[1], o.strides[1], o.padding, p[2], p[3]);
  return {x[0],        x[1],        x[2],         x[3],         rows.first,  cols.first,
          o.window[0], o.window[1], o.strides[0], o.strides[1], rows.second, cols.second};
}

/// Max (the first largest in row-major window order) or mean over the
/// in-image cells of each window, in double.
Values pool_reference(const Values& x, const Geometry& g, bool max) {
  Values y;
  for (std::int64_t b = 0; b < g.n; ++b) {
    for (std::int64_t i = 0; i < g.oh; ++i) {
      for (std::int64_t j = 0; j < g.ow; ++j) {
        for (std::int64_t ch = 0; ch < g.c; ++ch) {
          double best = -INFINITY, sum = 0;
          int count = 0;
          for (std::int64_t u = i * g.sh - g.pt; u < i * g.sh - g.pt + g.kh; ++u) {
            for (std::int64_t v = j * g.sw - g.pl; v < j * g.sw - g.pl + g.kw; ++v) {
              if (u < 0 || u >= g.h || v < 0 || v >= g.w) continue;
              const double value =
                  x[static_cast<std::size_t>(((b * g.h + u) * g.w + v) * g.c + ch)];
              best = std::max(best, value);
              sum += value;
              ++count;
            }
          }
          y.push_back(max ? best : sum / count);
        }
      }
    }
  }
  return y;
}

struct PoolCase {
  const char* name;
  Pool2dOptions options;
};

const PoolCase kCases[] = {
    {"2x2 stride 2 valid", {}},
    {"3x3 stride 2 valid", {.window = {3, 3}}},
    {"3x3 stride 2 same", {.window = {3, 3}, .padding = Padding::Same}},
    {"3x3 stride 1 same", {.window = {3, 3}, .strides = {1, 1}, .padding = Padding::Same}},
    {"3x2 stride 2x1 explicit 1,2,0,1",
     {.window = {3, 2},
      .strides = {2, 1},
      .padding = Padding::Explicit,
      .explicit_padding = {1, 2, 0, 1}}},
    {"2x2 stride 3 (gaps between windows)", {.strides = {3, 3}}},
};

}  // namespace

TEST_CASE("max_pool2d and avg_pool2d: forward and gradient against the CPU reference", "[pool]") {
  const Shape shape{2, 7, 5, 3};
  for (const PoolCase& c : kCases) {
    const Geometry g = geometry(shape, c.options);
    for (const bool max : {true, false}) {
      OpSpec spec{
          .name =
              fmt::format("{} {} on {}", max ? "max_pool2d" : "avg_pool2d", c.name, shape.str()),
          .shapes = {shape},
          .build =
              [&](const std::vector<Tensor>& in) {
                const Tensor y =
                    max ? vkt::max_pool2d(in[0], c.options) : vkt::avg_pool2d(in[0], c.options);
                CHECK(y.shape() == Shape{g.n, g.oh, g.ow, g.c});
                return y;
              },
          .reference = [&](const std::vector<Values>& in) { return pool_reference(in[0], g, max); },
      };
      vkt::test::check_op(spec, 3);
    }
  }
}

TEST_CASE("global_avg_pool is the mean over height and width, N x C", "[pool]") {
  const Shape shape{2, 7, 5, 3};
  const Geometry g = geometry(shape, {.window = {7, 5}, .strides = {1, 1}});
  OpSpec spec{
      .name = "global_avg_pool",
      .shapes = {shape},
      .build =
          [&](const std::vector<Tensor>& in) {
            const Tensor y = vkt::layers::global_avg_pool(in[0]);
            CHECK(y.shape() == Shape{2, 3});
            return y;
          },
      .reference = [&](const std::vector<Values>& in) { return pool_reference(in[0], g, false); },
  };
  vkt::test::check_op(spec, 4);
}

TEST_CASE("max_pool2d sends a tied window's gradient to its first cell, row-major", "[pool]") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", {1, 4, 4, 1});
  // Overlapping 2x2 windows at stride 1 over equal values: each window's first
  // cell is its top-left one, so cell (u, v) gets one dy per window starting there.
  const Tensor y = vkt::max_pool2d(x, {.strides = {1, 1}});
  std::vector<float> w(9);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i + 1);
  const Tensor loss = vkt::reduce_sum(y * g.constant({1, 3, 3, 1}, w));
  const Tensor dx = vkt::gradients(loss, {x})[0].dense;
  vkt::Executor exec(g, {y, dx});
  exec.feed("x", std::vector<float>(16, 0.25f));
  exec.run();
  CHECK(exec.read(y) == std::vector<float>(9, 0.25f));
  CHECK(exec.read(dx) == std::vector<float>{1, 2, 3, 0, 4, 5, 6, 0, 7, 8, 9, 0, 0, 0, 0, 0});

  // Ties inside windows: window (0,0) holds 0 5 / 5 2 and gives its dy (1) to
  // the top right 5; window (0,1) 5 5 / 2 3 to its first 5, the same cell (2);
  // window (0,2) 5 1 / 3 5 to its top left (3), not the 5 below right. The
  // other windows give theirs to their first largest cells.
  exec.feed("x", std::vector<float>{0, 5, 5, 1,  //
                                    5, 2, 3, 5,  //
                                    0, 0, 0, 0,  //
                                    0, 0, 0, 0});
  exec.run();
  CHECK(exec.read(dx) == std::vector<float>{0, 1 + 2, 3, 0, 4, 0, 5, 6, 7, 8, 9, 0, 0, 0, 0, 0});
}

TEST_CASE("avg_pool2d's gradient is linear in dy, and its own gradient is avg_pool2d again",
          "[pool]") {
  // The gradient of sum(avg_pool(x) * v) with respect to x is avg_pool_grad(v),
  // which reads v; its gradient, that of sum(avg_pool_grad(v) * u) with respect
  // to v, is avg_pool(u) (whatever v holds: it is not even read).
  vkt::Graph g(vkt::test::shared_device());
  const Pool2dOptions o{.window = {3, 3}, .padding = Padding::Same};
  const Shape shape{2, 7, 5, 3};
  const Tensor x = g.input("x", shape);
  const Tensor y = vkt::avg_pool2d(x, o);
  const Tensor v = g.input("v", y.shape());
  const Tensor dx = vkt::gradients(vkt::reduce_sum(y * v), {x})[0].dense;
  const std::vector<float> u =
      vkt::test::random_floats(static_cast<std::size_t>(shape.elements()), 4);
  const Tensor dv = vkt::gradients(vkt::reduce_sum(dx * g.constant(shape, u)), {v})[0].dense;
  const Tensor want = vkt::avg_pool2d(g.constant(shape, u), o);
  vkt::Executor exec(g, {dv, want});
  exec.run();
  const std::vector<float> got = exec.read(dv), expected = exec.read(want);
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(expected[i]).margin(1e-6));
}

TEST_CASE("padding is never the maximum, and never counted in the mean", "[pool]") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", {1, 3, 3, 2});
  const Pool2dOptions same{.window = {3, 3}, .strides = {2, 2}, .padding = Padding::Same};
  const Pool2dOptions explicit_pad{
      .window = {2, 2}, .padding = Padding::Explicit, .explicit_padding = {1, 1, 1, 1}};
  const Tensor m = vkt::max_pool2d(x, same);
  const Tensor a = vkt::avg_pool2d(x, explicit_pad);
  CHECK(m.shape() == Shape{1, 2, 2, 2});
  CHECK(a.shape() == Shape{1, 2, 2, 2});
  vkt::Executor exec(g, {m, a});
  std::vector<float> v(18);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = -10.0f - static_cast<float>(i);
  exec.feed("x", v);
  exec.run();
  // Same, 3x3 stride 2 on 3x3: one row and column of padding on each side;
  // values fall with the index, so each window's first in-image cell is its
  // maximum, never a padded 0.
  CHECK(exec.read(m) == std::vector<float>{-10, -11, -12, -13, -16, -17, -18, -19});
  // Explicit 1 on every side, 2x2 stride 2: the windows hold 1, 2, 2 and 4 cells.
  CHECK(exec.read(a) == std::vector<float>{-10, -11, -13, -14, -19, -20, -22, -23});
}

TEST_CASE("flatten is a reshape to N x rest, and its gradient flows back unchanged", "[pool]") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", {2, 3, 2, 2});
  const Tensor f = vkt::layers::flatten(x);
  CHECK(f.shape() == Shape{2, 12});
  CHECK(vkt::flatten(g.input("v", {5})).shape() == Shape{5, 1});
  CHECK(vkt::flatten(g.input("m", {5, 4})).shape() == Shape{5, 4});
  const std::vector<float> w = vkt::test::random_floats(24, 8);
  const Tensor dx = vkt::gradients(vkt::reduce_sum(f * g.constant({2, 12}, w)), {x})[0].dense;
  vkt::Executor exec(g, {f, dx});
  const std::vector<float> values = vkt::test::random_floats(24, 9);
  exec.feed("x", values);
  exec.run();
  CHECK(exec.read(f) == values);
  CHECK(exec.read(dx) == w);
  CHECK_THAT(vkt::test::error_of([&] { vkt::flatten(g.input("s", {})); }),
             Contains("flatten('s'): a scalar has no batch dimension"));
}

TEST_CASE("pooling reports bad inputs and options when the graph is built", "[pool]") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("img", {2, 7, 5, 3});
  using vkt::test::error_of;
  CHECK_THAT(error_of([&] {
               vkt::max_pool2d(g.input("flat", {2, 35}));
             }),
             Contains("max_pool2d('flat' [2, 35]") && Contains("rank-4 NHWC"));
  CHECK_THAT(error_of([&] {
               vkt::avg_pool2d(g.input("ids", {1, 4, 4, 1}, vkt::DType::I32));
             }),
             Contains("avg_pool2d('ids'") && Contains("holds i32 values"));
  CHECK_THAT(error_of([&] {
               vkt::max_pool2d(x, {.window = {8, 2}});
             }),
             Contains("the row window spans 8") && Contains("the input has only 7"));
  CHECK_THAT(error_of([&] {
               vkt::max_pool2d(x, {.window = {2, 6}, .padding = Padding::Valid});
             }),
             Contains("column window spans 6"));
  CHECK_THAT(error_of([&] {
               vkt::max_pool2d(x, {.strides = {0, 2}});
             }),
             Contains("the row stride is 0"));
  CHECK_THAT(error_of([&] {
               vkt::avg_pool2d(x, {.window = {0, 2}});
             }),
             Contains("the window height is 0"));
  CHECK_THAT(
      error_of([&] {
        vkt::max_pool2d(x, {.padding = Padding::Explicit, .explicit_padding = {0, -1, 0, 0}});
      }),
      Contains("the bottom padding is -1"));
  CHECK_THAT(error_of([&] {
               vkt::max_pool2d(x, {.padding = Padding::Explicit, .explicit_padding = {0, 0, 2, 0}});
             }),
             Contains("left padding 2 is not smaller than the window's width (2)"));
  CHECK_THAT(error_of([&] {
               vkt::max_pool2d(x, {.explicit_padding = {1, 1, 1, 1}});
             }),
             Contains("padding is not Padding::Explicit"));
  // Sizes are checked before they reach the kernels' 32-bit indices; nothing is allocated.
  CHECK_THAT(error_of([&] {
               vkt::max_pool2d(g.input("huge", {1, 1 << 16, 1 << 16, 2}));
             }),
             Contains("has 8589934592 elements"));
  CHECK_THAT(error_of([&] {
               vkt::avg_pool2d(g.input("wide", {1, 1, 1, 1 << 22}),
                               {.window = {1000, 1000},
                                .strides = {1, 1},
                                .padding = Padding::Explicit,
                                .explicit_padding = {999, 999, 999, 999}});
             }),
             Contains("the output [1, 1000, 1000, 4194304]"));
  CHECK_THAT(error_of([&] {
               vkt::global_avg_pool(g.input("r3", {2, 7, 5}));
             }),
             Contains("global_avg_pool('r3')") && Contains("rank-4 NHWC"));
}
