// rms_norm and layers::rms_norm: forward values and the gradients to x and
// gamma against a double-precision CPU reference and finite differences
// (op_check.h), both row kernels, the layer's variable and names, and the
// build-time errors.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/rms_norm.h>

#include "../test_support.h"
#include "op_check.h"
#include "row_kernels_scope.h"

using Catch::Matchers::Contains;
using vkt::Shape;
using vkt::Tensor;
using vkt::test::OpSpec;
using vkt::test::Values;

namespace {

/// x / sqrt(mean(x^2) + eps) * gamma over the last dimension, in double.
Values rms_norm_reference(const Values& x, const Values& gamma, double epsilon) {
  const std::size_t d = gamma.size();
  Values y(x.size());
  for (std::size_t base = 0; base < x.size(); base += d) {
    double sum_sq = 0;
    for (std::size_t k = 0; k < d; ++k) sum_sq += x[base + k] * x[base + k];
    const double rstd = 1.0 / std::sqrt(sum_sq / static_cast<double>(d) + epsilon);
    for (std::size_t k = 0; k < d; ++k) y[base + k] = x[base + k] * rstd * gamma[k];
  }
  return y;
}

struct NormCase {
  Shape shape;
  double low, high;  ///< range of x
};

}  // namespace

TEST_CASE("rms_norm: forward and gradients to x and gamma against the CPU reference",
          "[rms_norm]") {
  const NormCase c = GENERATE(NormCase{Shape{5, 37}, -1, 1},     // odd width, a workgroup per row
                              NormCase{Shape{2, 3, 6}, -1, 1},   // rank 3, short rows
                              NormCase{Shape{9}, -2, 2},         // one row
                              NormCase{Shape{3, 50, 4}, -1, 1},  // 3 blocks of rows for dgamma
                              NormCase{Shape{4, 33}, 99, 101},   // far from 0: rstd ~ 1/100
                              NormCase{Shape{2, 65}, -1, 1},     // one past the 64 lanes
                              NormCase{Shape{3, 300}, -1, 1});   // several times the lanes
  // The GPU's workgroup per row and the CPU's invocation per row, both on this device.
  const char* rows = GENERATE("workgroup", "invocation");
  const vkt::test::RowKernelsScope scope(rows);
  const std::int64_t d = c.shape[c.shape.rank() - 1];
  const double epsilon = 1e-3;  // large enough to matter in the reference
  OpSpec spec{
      .name =
          fmt::format("rms_norm {} x in [{}, {}], rows by {}", c.shape.str(), c.low, c.high, rows),
      .shapes = {c.shape, Shape{d}},
      .build =
          [&](const std::vector<Tensor>& in) {
            return vkt::rms_norm(in[0], in[1], static_cast<float>(epsilon));
          },
      .reference =
          [&](const std::vector<Values>& in) {
            return rms_norm_reference(in[0], in[1], static_cast<float>(epsilon));
          },
      .ranges = {{c.low, c.high}, {0.5, 1.5}},
  };
  vkt::test::check_op(spec, 31);
}

TEST_CASE("rms_norm: the two row kernels give a row's result whatever rows are beside it",
          "[rms_norm]") {
  // Towers split a batch by rows: a row's output and its dx must not depend on
  // the rows beside it, and a run must give the same bits as the last.
  const char* rows_by = GENERATE("workgroup", "invocation");
  INFO("rows by " << rows_by);
  const vkt::test::RowKernelsScope scope(rows_by);
  const std::int64_t d = 96;
  const std::vector<float> xv = vkt::test::random_floats(6 * d, 5, -3.0f, 3.0f);
  const std::vector<float> gv = vkt::test::random_floats(d, 6, 0.5f, 1.5f);
  const auto run = [&](std::int64_t rows) {
    vkt::Graph g(vkt::test::shared_device());
    const Tensor x = g.input("x", {rows, d});
    const Tensor c = g.constant({rows, d}, std::vector<float>(xv.rbegin(), xv.rbegin() + rows * d));
    const Tensor y = vkt::rms_norm(x, g.constant({d}, gv));
    const Tensor dx = vkt::gradients(vkt::reduce_sum(y * c), {x})[0].dense;
    vkt::Executor exec(g, {y, dx});
    exec.feed("x", std::vector<float>(xv.begin(), xv.begin() + rows * d));
    exec.run();
    return std::pair{exec.read(y), exec.read(dx)};
  };
  const auto all = run(6), again = run(6), half = run(3);
  CHECK(all == again);
  CHECK(std::equal(half.first.begin(), half.first.end(), all.first.begin()));
  CHECK(std::equal(half.second.begin(), half.second.end(), all.second.begin()));
}

TEST_CASE("layers::rms_norm owns gamma (ones), reuses it by name and names unnamed layers",
          "[rms_norm]") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", {2, 4});
  const Tensor y = vkt::layers::rms_norm(x, 1e-6f, "norm");
  const Tensor again = vkt::layers::rms_norm(y, 1e-6f, "norm");
  CHECK(g.variables().size() == 1);
  const Tensor gamma = *g.find_variable("norm/gamma");
  CHECK(gamma.shape() == Shape{4});
  vkt::layers::rms_norm(x);
  vkt::layers::rms_norm(x);
  CHECK(g.find_variable("rms_norm/gamma").has_value());
  CHECK(g.find_variable("rms_norm_1/gamma").has_value());
  const auto grads = vkt::gradients(vkt::reduce_sum(y * y), {gamma});
  vkt::Executor exec(g, {y, again, grads[0].dense});
  exec.feed("x", std::vector<float>{1, 2, 3, 4, 0, 0, 0, 0});
  exec.run();
  CHECK(g.values(gamma) == std::vector<float>(4, 1.0f));
  const std::vector<float> out = exec.read(y);
  const double r = 1.0 / std::sqrt(7.5 + 1e-6);  // row 0: mean of squares 30 / 4
  CHECK(out[0] == Approx(1 * r));
  CHECK(out[3] == Approx(4 * r));
  CHECK(out[4] == 0.0f);  // a zero row stays 0, epsilon keeps it finite
  // With gamma 1, y = xhat: d/dgamma_k sum(y^2) = 2 sum over rows of xhat_k^2.
  CHECK(exec.read(grads[0].dense)[1] == Approx(2 * 4 * r * r).epsilon(1e-5));
  CHECK(exec.read(again)[3] == Approx(out[3]).epsilon(1e-5));  // normalizing twice changes little
}

TEST_CASE("rms_norm reports bad inputs when the graph is built", "[rms_norm]") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", {2, 5});
  const Tensor gamma = g.input("gamma", {5});
  using vkt::test::error_of;
  CHECK_THAT(error_of([&] { vkt::rms_norm(x, g.input("g4", {4})); }),
             Contains("rms_norm('x' [2, 5])") && Contains("gamma 'g4' is f32 [4]") &&
                 Contains("it must be f32 [5]"));
  CHECK_THAT(error_of([&] {
               vkt::rms_norm(g.input("ids", {2, 5}, vkt::DType::I32), gamma);
             }),
             Contains("holds i32 values"));
  CHECK_THAT(error_of([&] { vkt::rms_norm(g.input("s", {}), gamma); }), Contains("x is a scalar"));
  CHECK_THAT(error_of([&] { vkt::rms_norm(x, gamma, -1.0f); }), Contains("epsilon is -1"));
  CHECK_THAT(error_of([&] { vkt::layers::rms_norm(x, -1e-3f, "bad"); }),
             Contains("rms_norm 'bad': epsilon is -0.001"));
  CHECK_FALSE(g.find_variable("bad/gamma").has_value());  // a failed call makes no variables
  vkt::layers::rms_norm(x, 1e-6f, "norm");
  CHECK_THAT(error_of([&] {
               vkt::layers::rms_norm(g.input("wide", {2, 6}), 1e-6f, "norm");
             }),
             Contains("norm/gamma"));
}
