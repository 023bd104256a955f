// The Executor's fusion (ExecutorOptions::fuse): a small loss with its
// gradient in one kernel, and chains of elementwise ops in one kernel each.
// Every fused program computes the same values as the same program unfused,
// in fewer commands, counted exactly.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <map>

#include <vktower/runtime/graph/autodiff.h>
#include <vktower/runtime/graph/executor.h>
#include <vktower/runtime/graph/graph.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/runtime/graph/ops/matmul.h>
#include <vktower/runtime/graph/ops/reduce.h>

#include "../shared_device.h"
#include "../test_support.h"
#include "fusion_check.h"
#include "row_kernels_scope.h"

using vkt::Initializer;
using vkt::Reduction;
using vkt::Shape;
using vkt::Tensor;

namespace {

using Outcome = vkt::test::FusionOutcome;
using vkt::test::check_fused;
using vkt::test::Feeds;

enum class LossKind { Squared, Absolute, Huber, Sigmoid, Sparse };

Tensor make_loss(LossKind kind, const Tensor& labels, const Tensor& x, const Tensor& w,
                 Reduction r) {
  switch (kind) {
    case LossKind::Squared:
      return vkt::mean_squared_error(labels, x, w, r);
    case LossKind::Absolute:
      return vkt::absolute_difference(labels, x, w, r);
    case LossKind::Huber:
      return vkt::huber(labels, x, w, 0.3f, r);
    case LossKind::Sigmoid:
      return vkt::sigmoid_cross_entropy(labels, x, w, r);
    case LossKind::Sparse:
      return vkt::sparse_softmax_cross_entropy(labels, x, w, r);
  }
  return {};
}

std::vector<float> class_labels(std::size_t n, int classes) {
  std::vector<float> labels(n);  // fed as i32 below
  for (std::size_t i = 0; i < n; ++i) labels[i] = static_cast<float>((i * 7 + 3) % classes);
  return labels;
}

}  // namespace

TEST_CASE("a small loss and its gradient run as one kernel with the unfused kernels' bits") {
  const LossKind kind = GENERATE(LossKind::Squared, LossKind::Absolute, LossKind::Huber,
                                 LossKind::Sigmoid, LossKind::Sparse);
  const Reduction reduction =
      GENERATE(Reduction::Sum, Reduction::SumOverBatchSize, Reduction::SumByNonzeroWeights);
  const bool weighted = GENERATE(false, true);
  INFO("loss " << static_cast<int>(kind) << " reduction " << static_cast<int>(reduction)
               << (weighted ? " weighted" : ""));
  const bool sparse = kind == LossKind::Sparse;
  const std::int64_t rows = 37, cols = 10;
  vkt::Graph g(vkt::test::shared_device(), {.seed = 5});
  const Tensor x = g.variable("x", {rows, cols}, Initializer::uniform(-3.0f, 3.0f));
  const Tensor labels =
      sparse ? g.input("labels", {rows}, vkt::DType::I32) : g.input("labels", {rows, cols});
  const Tensor w = weighted ? g.input("w", sparse ? Shape{rows} : Shape{rows, 1}) : Tensor{};
  const Tensor loss = make_loss(kind, labels, x, w, reduction);
  const Tensor dx = vkt::gradients(loss, {x})[0].dense;

  vkt::Executor plain(g, {loss, dx}, {.fuse = false});
  vkt::Executor fused(g, {loss, dx}, {.fuse = true});
  std::vector<float> w_values =
      vkt::test::random_floats(static_cast<std::size_t>(rows), 9, 0.0f, 2.0f);
  w_values[3] = 0.0f;  // SumByNonzeroWeights counts it out
  for (vkt::Executor* e : {&plain, &fused}) {
    if (sparse) {
      const std::vector<float> l = class_labels(static_cast<std::size_t>(rows), cols);
      e->feed("labels", std::vector<std::int32_t>(l.begin(), l.end()));
    } else {
      const float hi = kind == LossKind::Sigmoid ? 1.0f : 3.0f;
      e->feed("labels",
              vkt::test::random_floats(static_cast<std::size_t>(rows * cols), 4, 0.0f, hi));
    }
    if (weighted) e->feed("w", w_values);
    e->run();
  }
  CHECK(fused.read(loss) == plain.read(loss));
  CHECK(fused.read(dx) == plain.read(dx));
  // A mean over nonzero weights divides by their count: its numerator's
  // gradient comes from the division, computed after the loss, so it stays.
  const bool fusable = !(weighted && reduction == Reduction::SumByNonzeroWeights);
  CHECK(fused.dispatch_count() + (fusable ? 1 : 0) == plain.dispatch_count());
}

TEST_CASE("the fused sparse softmax cross-entropy against a double-precision reference") {
  const std::int64_t rows = 29, cols = 7;
  vkt::Graph g(vkt::test::shared_device(), {.seed = 3});
  const Tensor logits = g.variable("logits", {rows, cols}, Initializer::uniform(-30.0f, 30.0f));
  const Tensor labels = g.input("labels", {rows}, vkt::DType::I32);
  const Tensor loss = vkt::sparse_softmax_cross_entropy(labels, logits);
  const Tensor grad = vkt::gradients(loss, {logits})[0].dense;
  const std::vector<float> l = class_labels(static_cast<std::size_t>(rows), cols);
  vkt::Executor exec(g, {loss, grad});
  exec.feed("labels", std::vector<std::int32_t>(l.begin(), l.end()));
  exec.run();
  const std::vector<float> x = g.values(logits), got_grad = exec.read(grad);
  double total = 0;
  std::vector<float> want_grad(x.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = &x[static_cast<std::size_t>(r * cols)];
    const double m = *std::max_element(row, row + cols);
    double s = 0;
    for (std::int64_t k = 0; k < cols; ++k) s += std::exp(row[k] - m);
    const auto label = static_cast<std::int64_t>(l[static_cast<std::size_t>(r)]);
    total += m + std::log(s) - row[label];
    for (std::int64_t k = 0; k < cols; ++k) {
      const double p = std::exp(row[k] - m) / s;
      want_grad[static_cast<std::size_t>(r * cols + k)] =
          static_cast<float>(((k == label ? p - 1.0 : p)) / static_cast<double>(rows));
    }
  }
  CHECK(exec.read(loss)[0] == Approx(total / static_cast<double>(rows)).epsilon(1e-5));
  CHECK(vkt::test::norm_relative(got_grad, want_grad) < 1e-5);
}

TEST_CASE("a loss of up to 16384 gradient elements fuses, past that it runs as two kernels") {
  // (dispatches unfused, dispatches fused) of a sparse cross-entropy and its gradient.
  const auto counts = [](std::int64_t rows, std::int64_t classes) {
    vkt::Graph g(vkt::test::shared_device());
    const Tensor x = g.variable("x", {rows, classes}, Initializer::uniform(-1.0f, 1.0f));
    const Tensor labels = g.input("labels", {rows}, vkt::DType::I32);
    const Tensor loss = vkt::sparse_softmax_cross_entropy(labels, x);
    const Tensor dx = vkt::gradients(loss, {x})[0].dense;
    vkt::Executor plain(g, {loss, dx}, {.fuse = false});
    vkt::Executor fused(g, {loss, dx});
    return std::pair{plain.dispatch_count(), fused.dispatch_count()};
  };
  const auto saved = [&](std::int64_t rows, std::int64_t classes) {
    const auto [plain, fused] = counts(rows, classes);
    return plain - fused;
  };
  std::size_t per_invocation = 0;  // unfused dispatches of the 129 x 128 loss
  // Pinned to the CPU device's row kernels (an invocation per row): the loss
  // and its gradient are one kernel up to the limit, two past it.
  {
    const vkt::test::RowKernelsScope rows("invocation");
    CHECK(saved(128, 128) == 1);
    CHECK(saved(129, 128) == 0);
    CHECK(saved(200, 100) == 0);
    per_invocation = counts(129, 128).first;
  }
  // A GPU's (a workgroup per row): past the limit the loss and its gradient
  // run a workgroup per row (xent_rows.comp), more dispatches, and what
  // fuses is the sum of the per-row losses, 129 or 200 values, with its gradient.
  {
    const vkt::test::RowKernelsScope rows("workgroup");
    CHECK(saved(128, 128) == 1);
    CHECK(saved(129, 128) == 1);
    CHECK(saved(200, 100) == 1);
    CHECK(counts(129, 128).first > per_invocation);
  }
}

TEST_CASE("a loss's gradient moves next to its loss over the ops between them") {
  vkt::Graph g(vkt::test::shared_device(), {.seed = 8});
  const Tensor x = g.input("x", {16, 6});
  const Tensor w = g.variable("w", {6, 4}, Initializer::glorot_uniform());
  const Tensor labels = g.input("labels", {16}, vkt::DType::I32);
  const Tensor logits = vkt::matmul(x, w);
  const Tensor loss = vkt::sparse_softmax_cross_entropy(labels, logits);
  // A metric made after the loss: graph order puts it between the two.
  const Tensor metric = vkt::reduce_mean(vkt::square(logits));
  const Tensor dw = vkt::gradients(loss, {w})[0].dense;
  const std::vector<float> l = class_labels(16, 4);
  vkt::Executor plain(g, {loss, metric, dw}, {.fuse = false});
  vkt::Executor fused(g, {loss, metric, dw});
  for (vkt::Executor* e : {&plain, &fused}) {
    e->feed("x", vkt::test::random_floats(16 * 6, 2));
    e->feed("labels", std::vector<std::int32_t>(l.begin(), l.end()));
    e->run();
  }
  CHECK(fused.dispatch_count() + 1 == plain.dispatch_count());
  for (const Tensor& t : {loss, metric, dw}) CHECK(fused.read(t) == plain.read(t));
}

TEST_CASE("elementwise chains: every way of reading an input, at most 4 inputs a kernel") {
  vkt::Graph g(vkt::test::shared_device(), {.seed = 2});
  const std::int64_t n = 300, d = 7;
  const Tensor x = g.input("x", {n, d});
  const Tensor b = g.variable("b", {d}, Initializer::uniform(-1.0f, 1.0f));  // a repeating row
  const Tensor s = g.input("s", {n, 1});                                     // strided
  const Tensor col = g.input("col", {1, d});                                 // a row again
  Tensor y = vkt::sub(x, b);
  y = vkt::leaky_relu(y, 0.3f);
  y = vkt::mul(y, s);
  y = y + 0.5f;                     // a scalar constant: x, b, s, 0.5 fill the 4 inputs
  y = vkt::sub(g.scalar(2.0f), y);  // a fifth input: a second chain starts, swapped
  y = vkt::mul(y, y);               // itself
  y = vkt::pow(vkt::abs(y), 1.5f);  // an alpha
  y = vkt::div(y, col);
  const Feeds feeds{{"x", vkt::test::random_floats(n * d, 1)},
                    {"s", vkt::test::random_floats(n, 2)},
                    {"col", vkt::test::random_floats(d, 3, 0.5f, 2.0f)}};
  // 9 ops in 2 kernels.
  const Outcome fused = check_fused(g, {y}, feeds, 7);
  const std::vector<float> bv = g.values(b);
  std::vector<float> want(static_cast<std::size_t>(n * d));
  for (std::int64_t i = 0; i < n * d; ++i) {
    const auto at = [](const std::vector<float>& v, std::int64_t k) {
      return static_cast<double>(v[static_cast<std::size_t>(k)]);
    };
    double v = at(feeds.at("x"), i) - at(bv, i % d);
    v = v >= 0 ? v : 0.3 * v;
    v = v * at(feeds.at("s"), i / d) + 0.5;
    v = 2.0 - v;
    v = std::pow(std::abs(v * v), 1.5) / at(feeds.at("col"), i % d);
    want[static_cast<std::size_t>(i)] = static_cast<float>(v);
  }
  CHECK(vkt::test::norm_relative(fused.values[0], want) < 1e-6);
}

TEST_CASE("elementwise chains: at most 8 ops a kernel, across a broadcast head") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor a = g.input("a", {33, 1}), c = g.input("c", {1, 5});
  Tensor y = vkt::add(a, c);  // both operands broadcast to [33, 5]
  for (int i = 0; i < 5; ++i) y = vkt::tanh(vkt::neg(y));
  const Feeds feeds{{"a", vkt::test::random_floats(33, 1)}, {"c", vkt::test::random_floats(5, 2)}};
  const Outcome fused = check_fused(g, {y}, feeds, 9);  // 11 ops: 8 and 3
  const double first = std::tanh(-(feeds.at("a")[0] + feeds.at("c")[0]));
  double v = first;
  for (int i = 1; i < 5; ++i) v = std::tanh(-v);
  CHECK(fused.values[0][0] == Approx(v).epsilon(1e-6));
}

TEST_CASE("elementwise chains store the links that are fetched or read later") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", {40, 3}), col = g.input("col", {3});
  const Tensor u = vkt::exp(x);  // read by two ops: stored by the first one's chain
  const Tensor v = u + 1.0f, w = u * 2.0f;
  const Tensor p = vkt::relu(vkt::add(x, col));  // fetched: stored
  const Tensor q = vkt::sqrt(p);
  const Feeds feeds{{"x", vkt::test::random_floats(120, 4)},
                    {"col", vkt::test::random_floats(3, 5)}};
  // exp and + 1 in one kernel, * 2 in another; add, relu and sqrt in a third.
  const Outcome fused = check_fused(g, {v, w, p, q}, feeds, 3);
  for (std::size_t i = 0; i < 120; ++i) {
    CHECK(fused.values[1][i] == Approx(2.0 * std::exp(feeds.at("x")[i])).epsilon(1e-6));
    CHECK(fused.values[2][i] == std::max(feeds.at("x")[i] + feeds.at("col")[i % 3], 0.0f));
  }
}

TEST_CASE("elementwise chains in a training step: the same gradients and updates, fewer commands") {
  // bias_add, tanh, sigmoid and sub in one kernel, storing tanh's and
  // sigmoid's outputs for their gradients (bias_add's, which no gradient
  // reads, is never written); square alone: its gradient reads its input,
  // which would be a third store. Backward, the loss gradient's broadcast and
  // the gradients of square, sigmoid and tanh (each dy * f'(t), one forward
  // tensor t) in a second kernel: 3 more.
  vkt::test::check_dense_tanh_step(vkt::Precision::F32, 6);
}

TEST_CASE("random elementwise graphs: fused and unfused give the same values, in fewer commands") {
  // Graphs of 30 bounded elementwise ops over a [12, 5] input, a [5] variable,
  // a [12, 1] input and scalars, each op reading recent tensors, with random
  // fetches and a gradient: chains of every length, shared links, fetched
  // links, and memory reuse between them.
  for (std::uint32_t seed = 1; seed <= 24; ++seed) {
    INFO("seed " << seed);
    std::uint32_t state = seed * 2654435761u;
    const auto next = [&](std::uint32_t n) {
      state = state * 1664525u + 1013904223u;
      return (state >> 8) % n;
    };
    vkt::Graph g(vkt::test::shared_device(), {.seed = seed});
    const Tensor x = g.input("x", {12, 5});
    const Tensor v = g.variable("v", {5}, Initializer::uniform(-1.0f, 1.0f));
    const Tensor s = g.input("s", {12, 1});
    std::vector<Tensor> full{x};  // [12, 5] tensors
    const std::vector<Tensor> side{v, s, g.scalar(0.5f), g.scalar(-0.25f)};
    for (int i = 0; i < 30; ++i) {
      // Mostly the newest tensor, so that chains form; sometimes an older one.
      const Tensor& a = full[full.size() - 1 -
                             (next(4) == 0 ? next(static_cast<std::uint32_t>(full.size())) : 0)];
      const Tensor& b =
          next(2) ? side[next(4)] : full[next(static_cast<std::uint32_t>(full.size()))];
      Tensor t;
      switch (next(9)) {
        case 0:
          t = vkt::tanh(a);
          break;
        case 1:
          t = vkt::sigmoid(a);
          break;
        case 2:
          t = vkt::relu(a);
          break;
        case 3:
          t = vkt::neg(a);
          break;
        case 4:
          t = vkt::add(a, b);
          break;
        case 5:
          t = vkt::sub(b, a);
          break;
        case 6:
          t = vkt::mul(a, b);
          break;
        case 7:
          t = vkt::maximum(a, b);
          break;
        default:
          t = vkt::tanh(vkt::mul(a, a));
          break;
      }
      full.push_back(t);
    }
    std::vector<Tensor> fetches{full.back()};
    for (int k = 0; k < 3; ++k) fetches.push_back(full[1 + next(29)]);
    // Every op reads a tensor computed from x, so the gradient reaches it.
    fetches.push_back(vkt::gradients(vkt::reduce_sum(full.back()), {x})[0].dense);
    const Feeds feeds{{"x", vkt::test::random_floats(60, seed)},
                      {"s", vkt::test::random_floats(12, seed + 100)}};
    const Outcome plain = vkt::test::run_program(g, fetches, feeds, false);
    const Outcome fused = vkt::test::run_program(g, fetches, feeds, true);
    INFO("commands: unfused " << plain.commands << ", fused " << fused.commands);
    CHECK(fused.commands < plain.commands);
    // Within rounding, not bit for bit: an op reading one tensor twice (x - x)
    // lets the driver fold the rest of a fused chain at compile time, with its
    // compiler's exp rather than the shader's.
    for (std::size_t i = 0; i < fetches.size(); ++i) {
      INFO("fetch '" << fetches[i].name() << "'");
      CHECK(vkt::test::norm_relative(fused.values[i], plain.values[i]) < 1e-6);
    }
  }
}
