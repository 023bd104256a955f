// softmax, log_softmax, argmax and one_hot: forward values and gradients
// against double-precision CPU references (op_check.h), exact small cases,
// numerical stability and build-time errors.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include <vktower/runtime/graph/ops/softmax.h>

#include "../test_support.h"
#include "matmul_variant_scope.h"
#include "op_check.h"
#include "row_kernels_scope.h"

using Catch::Matchers::Contains;
using vkt::Shape;
using vkt::Tensor;
using vkt::test::OpSpec;
using vkt::test::Values;

namespace {

/// Softmax (or log_softmax) of `x` (shape `s`) along `axis`, in double.
Values softmax_reference(const Values& x, const Shape& s, int axis, bool log) {
  const int a = s.axis(axis, "reference");
  std::int64_t inner = 1;
  for (int i = a + 1; i < s.rank(); ++i) inner *= s[i];
  const std::int64_t len = s[a];
  Values y(x.size());
  for (std::int64_t r = 0; r < s.elements() / len; ++r) {
    const std::int64_t base = (r / inner) * len * inner + r % inner;
    const auto at = [&](std::int64_t k) { return static_cast<std::size_t>(base + k * inner); };
    double m = -INFINITY;
    for (std::int64_t k = 0; k < len; ++k) m = std::max(m, x[at(k)]);
    double sum = 0;
    for (std::int64_t k = 0; k < len; ++k) sum += std::exp(x[at(k)] - m);
    for (std::int64_t k = 0; k < len; ++k) {
      y[at(k)] = log ? x[at(k)] - m - std::log(sum) : std::exp(x[at(k)] - m) / sum;
    }
  }
  return y;
}

struct SoftmaxCase {
  Shape shape;
  int axis;
  double range;  ///< logits uniform in [-range, range]
};

}  // namespace

TEST_CASE("softmax and log_softmax: forward and gradient against the CPU reference") {
  const SoftmaxCase c =
      GENERATE(SoftmaxCase{Shape{7, 33}, -1, 3.0}, SoftmaxCase{Shape{1, 5}, -1, 3.0},
               SoftmaxCase{Shape{127, 10}, 1, 3.0}, SoftmaxCase{Shape{9, 4}, 0, 3.0},  // first axis
               SoftmaxCase{Shape{3, 5, 4}, 1, 3.0},  // middle axis
               SoftmaxCase{Shape{6}, 0, 3.0},        // rank 1
               SoftmaxCase{Shape{5, 12}, -1, 80.0},  // large logits
               // Rows of 32 and more: a workgroup per row (softmax_rows.comp),
               // shorter than its 64 lanes, one more, and many times longer.
               SoftmaxCase{Shape{2, 32}, -1, 3.0}, SoftmaxCase{Shape{5, 65}, -1, 3.0},
               SoftmaxCase{Shape{3, 1000}, -1, 3.0}, SoftmaxCase{Shape{4, 300}, -1, 80.0});
  // The GPU's workgroup per row and the CPU's invocation per row, both on this device.
  const char* rows = GENERATE("workgroup", "invocation");
  const vkt::test::RowKernelsScope scope(rows);
  for (const bool log : {false, true}) {
    OpSpec spec{
        .name = fmt::format("{} {} axis {} logits +-{}, rows by {}",
                            log ? "log_softmax" : "softmax", c.shape.str(), c.axis, c.range, rows),
        .shapes = {c.shape},
        .build =
            [&](const std::vector<Tensor>& in) {
              return log ? vkt::log_softmax(in[0], c.axis) : vkt::softmax(in[0], c.axis);
            },
        .reference =
            [&](const std::vector<Values>& in) {
              return softmax_reference(in[0], c.shape, c.axis, log);
            },
        .ranges = {{-c.range, c.range}},
    };
    vkt::test::check_op(spec, 11);
  }
}

TEST_CASE("the fused softmax backward kernels match their formulas built from ops") {
  vkt::Graph g(vkt::test::shared_device());
  const Shape s{13, 7};
  const Tensor x = g.input("x", s);
  const Tensor c = g.constant(s, vkt::test::random_floats(91, 7));
  const Tensor y = vkt::softmax(x);
  const Tensor ly = vkt::log_softmax(x);
  const auto dy = vkt::gradients(vkt::reduce_sum(y * c), {x})[0].dense;
  const auto dly = vkt::gradients(vkt::reduce_sum(ly * c), {x})[0].dense;
  // dx = y (dy - sum(dy y)) and dx = dy - exp(y) sum(dy), with dy = c.
  const Tensor want = y * (c - vkt::reduce_sum(c * y, -1, true));
  const Tensor want_log = c - vkt::exp(ly) * vkt::reduce_sum(c, -1, true);
  vkt::Executor exec(g, {dy, dly, want, want_log});
  exec.feed("x", vkt::test::random_floats(91, 8, -4.0f, 4.0f));
  exec.run();
  const auto got = exec.read(dy), got_log = exec.read(dly);
  const auto expected = exec.read(want), expected_log = exec.read(want_log);
  for (std::size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i] == Approx(expected[i]).margin(1e-6));
    CHECK(got_log[i] == Approx(expected_log[i]).margin(1e-6));
  }
}

TEST_CASE("softmax over long rows: the same bits every run and however the rows are split") {
  // A row's result must not depend on which other rows share the dispatch:
  // towers split a batch by rows, and 1 tower must match 2 bit for bit.
  const char* rows_by = GENERATE("workgroup", "invocation");
  INFO("rows by " << rows_by);
  const vkt::test::RowKernelsScope scope(rows_by);
  const std::vector<float> xv = vkt::test::random_floats(8 * 500, 17, -5.0f, 5.0f);
  const auto run = [&](std::int64_t rows, bool log) {
    vkt::Graph g(vkt::test::shared_device());
    const Tensor x = g.input("x", {rows, 500});
    const Tensor c =
        g.constant({rows, 500}, std::vector<float>(xv.begin(), xv.begin() + rows * 500));
    const Tensor y = log ? vkt::log_softmax(x) : vkt::softmax(x);
    const Tensor dx = vkt::gradients(vkt::reduce_sum(y * c), {x})[0].dense;
    vkt::Executor exec(g, {y, dx});
    exec.feed("x", std::vector<float>(xv.begin(), xv.begin() + rows * 500));
    exec.run();
    return std::pair{exec.read(y), exec.read(dx)};
  };
  for (const bool log : {false, true}) {
    INFO((log ? "log_softmax" : "softmax"));
    const auto all = run(8, log), again = run(8, log), half = run(4, log);
    CHECK(all == again);
    CHECK(std::equal(half.first.begin(), half.first.end(), all.first.begin()));
    CHECK(std::equal(half.second.begin(), half.second.end(), all.second.begin()));
  }
}

TEST_CASE("softmax and log_softmax stay finite and exact for huge logits") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", {3, 2});
  const Tensor y = vkt::softmax(x);
  const Tensor ly = vkt::log_softmax(x);
  vkt::Executor exec(g, {y, ly});
  // exp(1000) overflows and exp(-1000) underflows in f32: only the max-shifted
  // form gets these right; log(softmax) would give -inf for the 0 entry of row 1.
  exec.feed("x", std::vector<float>{1000, 1000, 0, -200, -1000, -999});
  exec.run();
  const std::vector<float> s = exec.read(y);
  const std::vector<float> l = exec.read(ly);
  CHECK(s[0] == Approx(0.5));
  CHECK(s[1] == Approx(0.5));
  CHECK(s[2] == Approx(1.0));
  CHECK(s[3] == 0.0f);
  CHECK(s[4] == Approx(1.0 / (1.0 + std::exp(1.0))));
  CHECK(s[5] == Approx(1.0 / (1.0 + std::exp(-1.0))));
  CHECK(l[0] == Approx(-std::log(2.0)));
  CHECK(l[2] == Approx(0.0).margin(1e-6));
  CHECK(l[3] == Approx(-200.0));
  CHECK(l[4] == Approx(-1.0 - std::log1p(std::exp(-1.0))));
  CHECK(l[5] == Approx(-std::log1p(std::exp(-1.0))));
}

TEST_CASE("argmax gives the first index of the maximum along an axis, as i32") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", {3, 4});
  const Tensor last = vkt::argmax(x);
  const Tensor first = vkt::argmax(x, 0);
  CHECK(last.dtype() == vkt::DType::I32);
  CHECK(last.shape() == Shape{3});
  CHECK(first.shape() == Shape{4});
  vkt::Executor exec(g, {last, first});
  exec.feed("x", std::vector<float>{1, 5, 5, 2,  // tie: the first 5 wins
                                    -3, -2, -9, -2.5f, 7, 0, 7.5f, -1});
  exec.run();
  CHECK(exec.read_i32(last) == std::vector<std::int32_t>{1, 1, 2});
  CHECK(exec.read_i32(first) == std::vector<std::int32_t>{2, 0, 2, 0});
}

TEST_CASE("one_hot: rows of on/off values, all off for an index out of range") {
  vkt::Graph g(vkt::test::shared_device());
  const std::vector<std::int32_t> ids{0, 2, -1, 3, 1, 2};
  const Tensor flat = g.constant_i32({6}, ids);
  const Tensor nested = g.constant_i32({2, 3}, ids);
  const Tensor a = vkt::one_hot(flat, 3, 5.0f, -1.0f);
  const Tensor b = vkt::one_hot(nested, 4);
  CHECK(a.shape() == Shape{6, 3});
  CHECK(b.shape() == Shape{2, 3, 4});
  vkt::Executor exec(g, {a, b});
  exec.run();
  CHECK(exec.read(a) == std::vector<float>{5, -1, -1, -1, -1, 5, -1, -1, -1,      // 0, 2, -1
                                           -1, -1, -1, -1, 5, -1, -1, -1, 5});    // 3, 1, 2
  CHECK(exec.read(b) == std::vector<float>{1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0,    // 0, 2, -1
                                           0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0});  // 3, 1, 2
}

TEST_CASE("argmax and one_hot pass no gradient, softmax's flows through a mask of them") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", {2, 3});
  // d/dx sum(x * one_hot(argmax(x))) = the mask itself: nothing flows into argmax.
  const Tensor mask = vkt::one_hot(vkt::argmax(x), 3);
  const Tensor loss = vkt::reduce_sum(x * mask);
  const auto grads = vkt::gradients(loss, {x});
  vkt::Executor exec(g, {loss, grads[0].dense});
  exec.feed("x", std::vector<float>{0.5f, -1, 2, 3, 4, -4});
  exec.run();
  CHECK(exec.read(loss)[0] == Approx(6.0));
  CHECK(exec.read(grads[0].dense) == std::vector<float>{0, 0, 1, 0, 1, 0});
}

TEST_CASE("softmax, argmax and one_hot report bad inputs when the graph is built") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("logits", {4, 3});
  const Tensor ids = g.input("ids", {4}, vkt::DType::I32);
  const Tensor s = g.input("s", {});
  using vkt::test::error_of;
  CHECK_THAT(error_of([&] { vkt::softmax(x, 2); }),
             Contains("softmax('logits' [4, 3])") && Contains("axis 2 is out of range"));
  CHECK_THAT(error_of([&] { vkt::log_softmax(ids); }),
             Contains("log_softmax") && Contains("'ids' [4] holds i32"));
  CHECK_THAT(error_of([&] { vkt::softmax(s); }), Contains("'s' is a scalar"));
  CHECK_THAT(error_of([&] { vkt::argmax(x, -3); }),
             Contains("argmax") && Contains("axis -3 is out of range"));
  CHECK_THAT(error_of([&] { vkt::one_hot(x, 3); }),
             Contains("one_hot: indices 'logits' [4, 3] hold f32"));
  CHECK_THAT(error_of([&] { vkt::one_hot(ids, 0); }), Contains("depth 0 for indices 'ids' [4]"));
  const Tensor rank6 = g.input("r6", {1, 1, 1, 1, 1, 2}, vkt::DType::I32);
  CHECK_THAT(error_of([&] { vkt::one_hot(rank6, 2); }), Contains("rank 6"));
}

TEST_CASE(
    "a RowKernelsScope or VariantScope that makes the shared device puts back the device's own "
    "kernels, not its own") {
  vkt::test::release_shared_device();
  const vkt::RowKernels own = vkt::test::shared_device().options().row_kernels;
  vkt::test::release_shared_device();
  {
    // The first shared_device() call is the scope's.
    const vkt::test::RowKernelsScope scope(own == vkt::RowKernels::Workgroup ? "invocation"
                                                                             : "workgroup");
  }
  CHECK(vkt::test::shared_device().options().row_kernels == own);
  vkt::test::release_shared_device();
  const vkt::MatmulKernels own_matmul = vkt::test::shared_device().options().matmul;
  vkt::test::release_shared_device();
  {
    const vkt::test::VariantScope scope(own_matmul == vkt::MatmulKernels::Tiled ? "texel"
                                                                                : "tiled");
  }
  CHECK(vkt::test::shared_device().options().matmul == own_matmul);
}
