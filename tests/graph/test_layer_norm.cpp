// layer_norm and layers::layer_norm: forward values and the gradients to x,
// gamma and beta against a double-precision CPU reference and finite
// differences (op_check.h), large means, the layer's variables, and the
// build-time errors.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include <vktower/runtime/graph/ops/layer_norm.h>
#include <vktower/runtime/graph/ops/layers.h>

#include "../test_support.h"
#include "op_check.h"
#include "row_kernels_scope.h"

using Catch::Matchers::Contains;
using vkt::Shape;
using vkt::Tensor;
using vkt::test::OpSpec;
using vkt::test::Values;

namespace {

/// (x - mean) / sqrt(var + eps) * gamma + beta over the last dimension, in double.
Values layer_norm_reference(const Values& x, const Values& gamma, const Values& beta,
                            double epsilon) {
  const std::size_t d = gamma.size();
  Values y(x.size());
  for (std::size_t base = 0; base < x.size(); base += d) {
    double mean = 0, var = 0;
    for (std::size_t k = 0; k < d; ++k) mean += x[base + k];
    mean /= static_cast<double>(d);
    for (std::size_t k = 0; k < d; ++k) var += (x[base + k] - mean) * (x[base + k] - mean);
    var /= static_cast<double>(d);
    const double rstd = 1.0 / std::sqrt(var + epsilon);
    for (std::size_t k = 0; k < d; ++k)
      y[base + k] = (x[base + k] - mean) * rstd * gamma[k] + beta[k];
  }
  return y;
}

struct NormCase {
  Shape shape;
  double low, high;  ///< range of x
  double forward_tolerance;
};

}  // namespace

TEST_CASE("layer_norm: forward and gradients to x, gamma and beta against the CPU reference",
          "[layer_norm]") {
  const NormCase c = GENERATE(
      NormCase{Shape{5, 7}, -1, 1, 1e-5},                                         // odd width
      NormCase{Shape{2, 3, 6}, -1, 1, 1e-5},                                      // rank 3
      NormCase{Shape{2, 3, 1, 5}, -2, 2, 1e-5}, NormCase{Shape{9}, -1, 1, 1e-5},  // one row
      NormCase{Shape{3, 50, 4}, -1, 1, 1e-5},  // 3 blocks of rows
      NormCase{Shape{4, 33}, 99, 101, 1e-3},   // a mean far from 0
      // Rows of 32 and more: a workgroup per row
      // (layer_norm_rows.comp), shorter than its 64
      // lanes, one more, several times as long.
      NormCase{Shape{3, 32}, -1, 1, 1e-5}, NormCase{Shape{2, 65}, -1, 1, 1e-5},
      NormCase{Shape{70, 300}, -1, 1, 1e-5}, NormCase{Shape{2, 257}, 99, 101, 1e-3});
  // The GPU's workgroup per row and the CPU's invocation per row, both on this device.
  const char* rows = GENERATE("workgroup", "invocation");
  const vkt::test::RowKernelsScope scope(rows);
  const std::int64_t d = c.shape[c.shape.rank() - 1];
  const double epsilon = 1e-3;  // large enough to matter in the reference
  OpSpec spec{
      .name = fmt::format("layer_norm {} x in [{}, {}], rows by {}", c.shape.str(), c.low, c.high,
                          rows),
      .shapes = {c.shape, Shape{d}, Shape{d}},
      .build =
          [&](const std::vector<Tensor>& in) {
            return vkt::layer_norm(in[0], in[1], in[2], static_cast<float>(epsilon));
          },
      .reference =
          [&](const std::vector<Values>& in) {
            return layer_norm_reference(in[0], in[1], in[2], static_cast<float>(epsilon));
          },
      .ranges = {{c.low, c.high}, {0.5, 1.5}, {-1, 1}},
      .forward_tolerance = c.forward_tolerance,
  };
  vkt::test::check_op(spec, 21);
}

TEST_CASE("layer_norm over long rows: the same bits every run and however the rows are split",
          "[layer_norm]") {
  // Towers split a batch by rows: a row's output and its dx must not depend on
  // the rows beside it.
  const char* rows_by = GENERATE("workgroup", "invocation");
  INFO("rows by " << rows_by);
  const vkt::test::RowKernelsScope scope(rows_by);
  const std::int64_t d = 384;
  const std::vector<float> xv = vkt::test::random_floats(6 * d, 5, -3.0f, 3.0f);
  const std::vector<float> gv = vkt::test::random_floats(d, 6, 0.5f, 1.5f);
  const auto run = [&](std::int64_t rows) {
    vkt::Graph g(vkt::test::shared_device());
    const Tensor x = g.input("x", {rows, d});
    const Tensor gamma = g.constant({d}, gv);
    const Tensor beta = g.constant({d}, std::vector<float>(static_cast<std::size_t>(d), 0.25f));
    const Tensor c = g.constant({rows, d}, std::vector<float>(xv.rbegin(), xv.rbegin() + rows * d));
    const Tensor y = vkt::layer_norm(x, gamma, beta);
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

TEST_CASE("layers::layer_norm owns gamma (ones) and beta (zeros) and reuses them by name",
          "[layer_norm]") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", {3, 4});
  const Tensor y = vkt::layers::layer_norm(x, 1e-5f, "ln");
  const Tensor again = vkt::layers::layer_norm(y, 1e-5f, "ln");
  CHECK(g.variables().size() == 2);
  const Tensor gamma = *g.find_variable("ln/gamma");
  const Tensor beta = *g.find_variable("ln/beta");
  CHECK(gamma.shape() == Shape{4});
  CHECK(beta.shape() == Shape{4});
  const auto grads = vkt::gradients(vkt::reduce_sum(y * y), {gamma, beta});
  vkt::Executor exec(g, {y, again, grads[0].dense, grads[1].dense});
  exec.feed("x", std::vector<float>{1, 2, 3, 4, -1, -1, -1, -1, 10, 0, 10, 0});
  exec.run();
  CHECK(g.values(gamma) == std::vector<float>(4, 1.0f));
  CHECK(g.values(beta) == std::vector<float>(4, 0.0f));
  const std::vector<float> out = exec.read(y);
  const double r = 1.0 / std::sqrt(1.25 + 1e-5);  // row 1: mean 2.5, variance 1.25
  CHECK(out[0] == Approx(-1.5 * r));
  CHECK(out[3] == Approx(1.5 * r));
  CHECK(out[4] == 0.0f);  // a constant row normalizes to 0, epsilon keeps it finite
  CHECK(out[8] == Approx(1.0).epsilon(1e-5));
  CHECK(out[9] == Approx(-1.0).epsilon(1e-5));
  // With gamma 1 and beta 0, y = xhat: d/dgamma sum(y^2) = 2 sum over rows of
  // xhat^2, d/dbeta = 2 sum over rows of xhat.
  CHECK(exec.read(grads[0].dense)[0] == Approx(2 * (2.25 * r * r + 1.0)).epsilon(1e-5));
  CHECK(exec.read(grads[1].dense)[0] == Approx(2 * (-1.5 * r + 1.0)).epsilon(1e-5));
  CHECK(exec.read(again).size() == 12);
}

TEST_CASE("layer_norm reports bad inputs when the graph is built", "[layer_norm]") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", {2, 5});
  const Tensor gamma = g.input("gamma", {5});
  const Tensor beta = g.input("beta", {5});
  using vkt::test::error_of;
  CHECK_THAT(error_of([&] { vkt::layer_norm(x, g.input("g4", {4}), beta); }),
             Contains("layer_norm('x' [2, 5])") && Contains("gamma 'g4' is f32 [4]") &&
                 Contains("it must be f32 [5]"));
  CHECK_THAT(error_of([&] {
               vkt::layer_norm(x, gamma, g.input("b2", {1, 5}));
             }),
             Contains("beta 'b2' is f32 [1, 5]"));
  CHECK_THAT(error_of([&] {
               vkt::layer_norm(g.input("ids", {2, 5}, vkt::DType::I32), gamma, beta);
             }),
             Contains("holds i32 values"));
  CHECK_THAT(error_of([&] { vkt::layer_norm(g.input("s", {}), gamma, beta); }),
             Contains("x is a scalar"));
  CHECK_THAT(error_of([&] { vkt::layer_norm(x, gamma, beta, -1.0f); }), Contains("epsilon is -1"));
  CHECK_THAT(error_of([&] { vkt::layers::layer_norm(g.input("s2", {}), 1e-5f, "ln"); }),
             Contains("layer_norm 'ln': input 's2' is a scalar"));
  CHECK_THAT(error_of([&] { vkt::layers::layer_norm(x, -1e-3f, "bad"); }),
             Contains("layer_norm 'bad': epsilon is -0.001"));
  CHECK_THAT(error_of([&] {
               vkt::layers::layer_norm(g.input("ids2", {2, 5}, vkt::DType::I32), 1e-5f, "bad");
             }),
             Contains("layer_norm 'bad': input 'ids2' [2, 5] holds i32 values"));
  CHECK_FALSE(g.find_variable("bad/gamma").has_value());  // a failed call makes no variables
  vkt::layers::layer_norm(x, 1e-5f, "ln");
  CHECK_THAT(error_of([&] {
               vkt::layers::layer_norm(g.input("wide", {2, 6}), 1e-5f, "ln");
             }),
             Contains("ln/gamma"));
}
