// Losses and the tf.losses reductions: forward values and gradients (labels,
// predictions and weights) against double-precision CPU references
// (op_check.h), hand-computed small cases, stability, fusion and errors.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/runtime/graph/ops/shape_ops.h>
#include <vktower/runtime/graph/ops/softmax.h>

#include "../test_support.h"
#include "op_check.h"

using Catch::Matchers::Contains;
using vkt::Reduction;
using vkt::Shape;
using vkt::Tensor;
using vkt::test::OpSpec;
using vkt::test::Values;

namespace {

const char* name_of(Reduction r) {
  static const char* names[] = {"None", "Sum", "Mean", "SumOverBatchSize", "SumByNonzeroWeights"};
  return names[static_cast<int>(r)];
}

const auto kReductions = {Reduction::None, Reduction::Sum, Reduction::Mean,
                          Reduction::SumOverBatchSize, Reduction::SumByNonzeroWeights};

/// tf.losses.compute_weighted_loss in double; `w` empty = weight 1.
Values reduce_reference(const Values& l, const Shape& s, const Values& w, const Shape& ws,
                        Reduction r) {
  Values weighted(l.size());
  double sum = 0, sum_w = 0, nonzero = 0;
  for (std::int64_t j = 0; j < s.elements(); ++j) {
    const double wj = w.empty() ? 1.0 : vkt::test::at_broadcast(w, ws, vkt::test::coords(j, s));
    const auto i = static_cast<std::size_t>(j);
    weighted[i] = wj * l[i];
    sum += weighted[i];
    sum_w += wj;
    nonzero += wj != 0.0 ? 1.0 : 0.0;
  }
  const auto safe = [](double a, double b) { return b == 0.0 ? 0.0 : a / b; };
  switch (r) {
    case Reduction::None:
      return weighted;
    case Reduction::Sum:
      return {sum};
    case Reduction::Mean:
      return {safe(sum, sum_w)};
    case Reduction::SumOverBatchSize:
      return {sum / static_cast<double>(l.size())};
    case Reduction::SumByNonzeroWeights:
      return {safe(sum, nonzero)};
  }
  return {};
}

enum class Kind { Squared, Absolute, Huber, Sigmoid };

double pointwise_reference(Kind k, double z, double x) {
  const double e = x - z;
  switch (k) {
    case Kind::Squared:
      return e * e;
    case Kind::Absolute:
      return std::abs(e);
    case Kind::Huber:
      return std::abs(e) <= 0.7 ? 0.5 * e * e : 0.7 * std::abs(e) - 0.5 * 0.7 * 0.7;
    case Kind::Sigmoid:
      return std::max(x, 0.0) - x * z + std::log1p(std::exp(-std::abs(x)));
  }
  return 0;
}

Tensor pointwise_loss(Kind k, const Tensor& z, const Tensor& x, const Tensor& w, Reduction r) {
  switch (k) {
    case Kind::Squared:
      return vkt::mean_squared_error(z, x, w, r);
    case Kind::Absolute:
      return vkt::absolute_difference(z, x, w, r);
    case Kind::Huber:
      return vkt::huber(z, x, w, 0.7f, r);
    case Kind::Sigmoid:
      return vkt::sigmoid_cross_entropy(z, x, w, r);
  }
  return {};
}

/// check_op of one pointwise loss, each reduction, without weights and with
/// weights of `ws` (all three inputs differentiated).
void check_pointwise(Kind kind, const char* name, const Shape& s, const Shape& ws,
                     std::pair<double, double> label_range, std::pair<double, double> x_range) {
  for (const Reduction r : kReductions) {
    for (const bool weighted : {false, true}) {
      OpSpec spec{
          .name = fmt::format("{} {} weights {} {}", name, s.str(), weighted ? ws.str() : "none",
                              name_of(r)),
          .shapes = weighted ? std::vector<Shape>{s, s, ws} : std::vector<Shape>{s, s},
          .build =
              [&](const std::vector<Tensor>& in) {
                return pointwise_loss(kind, in[0], in[1], weighted ? in[2] : Tensor{}, r);
              },
          .reference =
              [&](const std::vector<Values>& in) {
                Values l(in[0].size());
                for (std::size_t i = 0; i < l.size(); ++i) {
                  l[i] = pointwise_reference(kind, in[0][i], in[1][i]);
                }
                return reduce_reference(l, s, weighted ? in[2] : Values{}, ws, r);
              },
          // Positive weights: Mean divides by their sum.
          .ranges = {label_range, x_range, {0.1, 1.0}},
      };
      vkt::test::check_op(spec, 21);
    }
  }
}

}  // namespace

TEST_CASE("mean_squared_error: every reduction, forward and gradients against the CPU") {
  check_pointwise(Kind::Squared, "mean_squared_error", Shape{7, 33}, Shape{7, 1}, {-1, 1}, {-1, 1});
}

TEST_CASE("absolute_difference: every reduction, forward and gradients against the CPU") {
  check_pointwise(Kind::Absolute, "absolute_difference", Shape{1, 5}, Shape{}, {-1, 1}, {-1, 1});
}

TEST_CASE("huber: every reduction, forward and gradients against the CPU") {
  // |e| up to 3 against delta 0.7: both branches.
  check_pointwise(Kind::Huber, "huber", Shape{7, 33}, Shape{33}, {-1.5, 1.5}, {-1.5, 1.5});
}

TEST_CASE("sigmoid_cross_entropy: every reduction, forward and gradients against the CPU") {
  check_pointwise(Kind::Sigmoid, "sigmoid_cross_entropy", Shape{7, 33}, Shape{7, 33}, {0, 1},
                  {-6, 6});
  check_pointwise(Kind::Sigmoid, "sigmoid_cross_entropy large logits", Shape{3, 4}, Shape{3, 1},
                  {0, 1}, {-80, 80});
}

namespace {

std::vector<std::int32_t> labels_for(std::int64_t rows, std::int64_t classes) {
  std::vector<std::int32_t> labels(static_cast<std::size_t>(rows));
  for (std::size_t i = 0; i < labels.size(); ++i) {
    labels[i] = static_cast<std::int32_t>((i * 7 + 3) % static_cast<std::size_t>(classes));
  }
  return labels;
}

/// Per-row softmax cross-entropy in double.
Values xent_reference(const Values& x, std::int64_t rows, std::int64_t classes) {
  const auto labels = labels_for(rows, classes);
  Values l(static_cast<std::size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    const double* row = &x[static_cast<std::size_t>(r * classes)];
    double m = -INFINITY;
    for (std::int64_t k = 0; k < classes; ++k) m = std::max(m, row[k]);
    double s = 0;
    for (std::int64_t k = 0; k < classes; ++k) s += std::exp(row[k] - m);
    l[static_cast<std::size_t>(r)] = std::log(s) + m - row[labels[static_cast<std::size_t>(r)]];
  }
  return l;
}

}  // namespace

TEST_CASE("sparse_softmax_cross_entropy: forward and gradient against the CPU") {
  struct Case {
    std::int64_t rows, classes;
    double range;
    Reduction reduction;
    Shape weights;  ///< rank 0 with `weighted` false means none
    bool weighted;
  };
  const Case c = GENERATE(Case{7, 33, 3.0, Reduction::SumByNonzeroWeights, Shape{}, false},
                          Case{1, 5, 3.0, Reduction::Sum, Shape{}, false},
                          Case{127, 10, 3.0, Reduction::Mean, Shape{127}, true},
                          Case{6, 9, 80.0, Reduction::SumByNonzeroWeights, Shape{6}, true},
                          Case{6, 9, 80.0, Reduction::None, Shape{}, false},
                          Case{5, 4, 2.0, Reduction::SumOverBatchSize, Shape{}, true},
                          Case{5, 4, 2.0, Reduction::None, Shape{5}, true});
  const Shape logits{c.rows, c.classes};
  OpSpec spec{
      .name = fmt::format("sparse_softmax_cross_entropy {} logits +-{} weights {} {}", logits.str(),
                          c.range, c.weighted ? c.weights.str() : "none", name_of(c.reduction)),
      .shapes = c.weighted ? std::vector<Shape>{logits, c.weights} : std::vector<Shape>{logits},
      .build =
          [&](const std::vector<Tensor>& in) {
            const Tensor labels =
                in[0].graph().constant_i32({c.rows}, labels_for(c.rows, c.classes));
            return vkt::sparse_softmax_cross_entropy(labels, in[0], c.weighted ? in[1] : Tensor{},
                                                     c.reduction);
          },
      .reference =
          [&](const std::vector<Values>& in) {
            return reduce_reference(xent_reference(in[0], c.rows, c.classes), Shape{c.rows},
                                    c.weighted ? in[1] : Values{}, c.weights, c.reduction);
          },
      .ranges = {{-c.range, c.range}, {0.1, 1.0}},
  };
  vkt::test::check_op(spec, 31);
}

namespace {

/// Runs `loss` of the 2x2 example and returns its values.
std::vector<float> run_loss(vkt::Graph& g, const Tensor& loss) {
  vkt::Executor exec(g, {loss});
  exec.run();
  return exec.read(loss);
}

}  // namespace

TEST_CASE("reductions on a 2x2 example with zero weights, by hand") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor labels = g.constant({2, 2}, std::vector<float>{1, 2, 3, 4});
  const Tensor predictions = g.constant({2, 2}, std::vector<float>{2, 2, 1, 7});
  // Squared errors l = [1, 0, 4, 9].
  const auto mse = [&](const Tensor& w, Reduction r) {
    return run_loss(g, vkt::mean_squared_error(labels, predictions, w, r));
  };
  SECTION("full weights [[2, 3], [0.5, 0]]: w*l = [2, 0, 2, 0]") {
    const Tensor w = g.constant({2, 2}, std::vector<float>{2, 3, 0.5f, 0});
    CHECK(mse(w, Reduction::None) == std::vector<float>{2, 0, 2, 0});
    CHECK(mse(w, Reduction::Sum)[0] == Approx(4.0));
    CHECK(mse(w, Reduction::Mean)[0] == Approx(4.0 / 5.5));               // / sum(w)
    CHECK(mse(w, Reduction::SumOverBatchSize)[0] == Approx(1.0));         // / 4 elements
    CHECK(mse(w, Reduction::SumByNonzeroWeights)[0] == Approx(4.0 / 3));  // 3 weights != 0
    CHECK(run_loss(g, vkt::mean_squared_error(labels, predictions, w))[0] == Approx(4.0 / 3));
  }
  SECTION("weights [[0], [2]] broadcast over columns: w*l = [0, 0, 8, 18]") {
    const Tensor w = g.constant({2, 1}, std::vector<float>{0, 2});
    CHECK(mse(w, Reduction::None) == std::vector<float>{0, 0, 8, 18});
    CHECK(mse(w, Reduction::Sum)[0] == Approx(26.0));
    CHECK(mse(w, Reduction::Mean)[0] == Approx(6.5));                  // / (2 + 2)
    CHECK(mse(w, Reduction::SumOverBatchSize)[0] == Approx(6.5));      // / 4
    CHECK(mse(w, Reduction::SumByNonzeroWeights)[0] == Approx(13.0));  // / 2 broadcast nonzeros
  }
  SECTION("a scalar weight 0.5: Mean divides by 0.5 * 4, SumByNonzeroWeights by 4") {
    const Tensor w = g.scalar(0.5f);
    CHECK(mse(w, Reduction::None) == std::vector<float>{0.5f, 0, 2, 4.5f});
    CHECK(mse(w, Reduction::Sum)[0] == Approx(7.0));
    CHECK(mse(w, Reduction::Mean)[0] == Approx(3.5));
    CHECK(mse(w, Reduction::SumOverBatchSize)[0] == Approx(1.75));
    CHECK(mse(w, Reduction::SumByNonzeroWeights)[0] == Approx(1.75));
  }
  SECTION("no weights: every averaging reduction is the mean") {
    CHECK(mse(Tensor{}, Reduction::None) == std::vector<float>{1, 0, 4, 9});
    CHECK(mse(Tensor{}, Reduction::Sum)[0] == Approx(14.0));
    CHECK(mse(Tensor{}, Reduction::Mean)[0] == Approx(3.5));
    CHECK(mse(Tensor{}, Reduction::SumOverBatchSize)[0] == Approx(3.5));
    CHECK(mse(Tensor{}, Reduction::SumByNonzeroWeights)[0] == Approx(3.5));
  }
  SECTION("all weights zero: Mean and SumByNonzeroWeights give 0, not NaN") {
    const Tensor w = g.constant({2}, std::vector<float>{0, 0});
    CHECK(mse(w, Reduction::Mean)[0] == 0.0f);
    CHECK(mse(w, Reduction::SumByNonzeroWeights)[0] == 0.0f);
  }
  SECTION("the other pointwise losses on the same errors e = [1, 0, -2, 3]") {
    CHECK(run_loss(g, vkt::absolute_difference(labels, predictions, {}, Reduction::None)) ==
          std::vector<float>{1, 0, 2, 3});
    const auto h = run_loss(g, vkt::huber(labels, predictions, {}, 1.5f, Reduction::None));
    CHECK(h[0] == Approx(0.5));
    CHECK(h[1] == 0.0f);
    CHECK(h[2] == Approx(1.875));  // 1.5 * 2 - 0.5 * 1.5^2
    CHECK(h[3] == Approx(3.375));
  }
}

TEST_CASE("sigmoid_cross_entropy by hand, stable at +-100") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor z = g.constant({5}, std::vector<float>{1, 0, 0.5f, 1, 0});
  const Tensor x = g.constant({5}, std::vector<float>{0, 2, -3, 100, -100});
  // A naive -z log(s) - (1 - z) log(1 - s) gives 0 * log(0) = NaN at +-100.
  const auto l = run_loss(g, vkt::sigmoid_cross_entropy(z, x, {}, Reduction::None));
  CHECK(l[0] == Approx(std::log(2.0)));
  CHECK(l[1] == Approx(2.0 + std::log1p(std::exp(-2.0))));
  CHECK(l[2] == Approx(1.5 + std::log1p(std::exp(-3.0))));
  CHECK(l[3] == Approx(0.0).margin(1e-30));
  CHECK(l[4] == Approx(0.0).margin(1e-30));
}

TEST_CASE("sparse_softmax_cross_entropy by hand: huge logits and gradients") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor logits = g.input("logits", {2, 3});
  const Tensor labels = g.constant_i32({2}, std::vector<std::int32_t>{2, 1});
  const Tensor loss = vkt::sparse_softmax_cross_entropy(labels, logits, {}, Reduction::Sum);
  const auto grads = vkt::gradients(loss, {logits});
  vkt::Executor exec(g, {loss, grads[0].dense});
  exec.feed("logits", std::vector<float>{1, 2, 3, 1000, 0, -1000});
  exec.run();
  const double d = 1 + std::exp(-1.0) + std::exp(-2.0);
  // Row 1 would overflow exp(1000) without the max shift: its loss is 1000.
  CHECK(exec.read(loss)[0] == Approx(std::log(d) + 1000.0));
  const auto dx = exec.read(grads[0].dense);
  CHECK(dx[0] == Approx(std::exp(-2.0) / d));
  CHECK(dx[1] == Approx(std::exp(-1.0) / d));
  CHECK(dx[2] == Approx(1.0 / d - 1.0));
  CHECK(dx == std::vector<float>{dx[0], dx[1], dx[2], 1, -1, 0});
}

TEST_CASE("sparse_softmax_cross_entropy's fused backward matches its formula built from ops") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor logits = g.input("logits", {13, 7});
  const Tensor labels = g.constant_i32({13}, labels_for(13, 7));
  const Tensor c = g.constant({13}, vkt::test::random_floats(13, 5));
  const Tensor per_row = vkt::sparse_softmax_cross_entropy(labels, logits, {}, Reduction::None);
  const auto dx = vkt::gradients(vkt::reduce_sum(per_row * c), {logits})[0].dense;
  // (softmax(logits) - one_hot(labels)) * dy[:, None], with dy = c.
  const Tensor want =
      (vkt::softmax(logits) - vkt::one_hot(labels, 7)) * vkt::reshape(c, Shape{13, 1});
  vkt::Executor exec(g, {dx, want});
  exec.feed("logits", vkt::test::random_floats(91, 9, -5.0f, 5.0f));
  exec.run();
  const auto got = exec.read(dx), expected = exec.read(want);
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(expected[i]).margin(1e-6));
}

TEST_CASE(
    "sparse_softmax_cross_entropy with ignore_index: the other labels' mean, no gradient for "
    "the ignored, over batch x time x vocab logits") {
  constexpr std::int64_t kBatch = 2, kTime = 5, kClasses = 7, kRows = kBatch * kTime;
  std::vector<std::int32_t> labels = labels_for(kRows, kClasses);
  for (std::size_t i = 1; i < labels.size(); i += 3) labels[i] = -100;  // 3 of 10 ignored
  const auto reduction = GENERATE(Reduction::Mean, Reduction::Sum, Reduction::None);
  const bool weighted = reduction == Reduction::Sum;
  const OpSpec spec{
      .name = fmt::format("ignore_index {}, weights {}", name_of(reduction), weighted),
      .shapes = weighted ? std::vector<Shape>{Shape{kBatch, kTime, kClasses}, Shape{kBatch, 1}}
                         : std::vector<Shape>{Shape{kBatch, kTime, kClasses}},
      .build =
          [&](const std::vector<Tensor>& in) {
            const Tensor y = in[0].graph().constant_i32({kBatch, kTime}, labels);
            return vkt::sparse_softmax_cross_entropy(y, in[0], weighted ? in[1] : Tensor{},
                                                     reduction, -100);
          },
      .reference =
          [&](const std::vector<Values>& in) {
            std::vector<std::int32_t> clean = labels;
            for (auto& l : clean) l = std::max(l, 0);
            Values out;
            double sum = 0, count = 0;
            for (std::int64_t r = 0; r < kRows; ++r) {
              const double* row = &in[0][static_cast<std::size_t>(r * kClasses)];
              double m = -INFINITY, e = 0;
              for (std::int64_t k = 0; k < kClasses; ++k) m = std::max(m, row[k]);
              for (std::int64_t k = 0; k < kClasses; ++k) e += std::exp(row[k] - m);
              const bool kept = labels[static_cast<std::size_t>(r)] != -100;
              const double w = (weighted ? in[1][static_cast<std::size_t>(r / kTime)] : 1.0) *
                               (kept ? 1.0 : 0.0);
              const double l = std::log(e) + m - row[clean[static_cast<std::size_t>(r)]];
              out.push_back(w * l);
              sum += w * l;
              count += kept ? 1 : 0;
            }
            if (reduction == Reduction::None) return out;
            return Values{reduction == Reduction::Mean ? sum / count : sum};
          },
      .ranges = {{-3.0, 3.0}, {0.2, 1.0}},
      .differentiable = {true, false}};
  const auto result = vkt::test::check_op(spec, 17);
  // The ignored rows' logits get exactly zero gradient.
  for (std::size_t r = 1; r < labels.size(); r += 3) {
    for (std::int64_t k = 0; k < kClasses; ++k)
      CHECK(result.gradients[0][r * kClasses + static_cast<std::size_t>(k)] == 0.0f);
  }
}

TEST_CASE("sparse_softmax_cross_entropy: an out-of-range label gives NaN, not a stray read") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor logits = g.input("logits", {3, 2});
  const Tensor labels = g.constant_i32({3}, std::vector<std::int32_t>{0, 2, -1});
  const Tensor per_row = vkt::sparse_softmax_cross_entropy(labels, logits, {}, Reduction::None);
  const auto grads = vkt::gradients(vkt::reduce_sum(per_row), {logits});
  vkt::Executor exec(g, {per_row, grads[0].dense});
  exec.feed("logits", std::vector<float>{0, 0, 1, 2, 3, 4});
  exec.run();
  const auto l = exec.read(per_row);
  const auto dx = exec.read(grads[0].dense);
  CHECK(l[0] == Approx(std::log(2.0)));
  CHECK(std::isnan(l[1]));
  CHECK(std::isnan(l[2]));
  CHECK(dx[0] == Approx(-0.5));
  CHECK(dx[1] == Approx(0.5));
  for (std::size_t i = 2; i < 6; ++i) CHECK(std::isnan(dx[i]));
}

TEST_CASE("a loss with the default reduction is one dispatch forward and one backward, one fused") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor logits = g.input("logits", {8, 5});
  const Tensor labels = g.constant_i32({8}, labels_for(8, 5));
  const Tensor loss = vkt::sparse_softmax_cross_entropy(labels, logits);
  const Tensor mse = vkt::mean_squared_error(logits, logits * 2.0f);
  const auto grads = vkt::gradients(loss, {logits});
  const auto base = vkt::Executor(g, {vkt::identity(logits)}).dispatch_count() - 1;
  CHECK(vkt::Executor(g, {loss}).dispatch_count() - base == 1);
  CHECK(vkt::Executor(g, {loss, grads[0].dense}, {.fuse = false}).dispatch_count() - base == 2);
  CHECK(vkt::Executor(g, {loss, grads[0].dense}).dispatch_count() - base == 1);
  CHECK(vkt::Executor(g, {mse}).dispatch_count() - base == 2);  // with the * 2
}

TEST_CASE("losses report bad shapes and types when the graph is built") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor y = g.input("y", {4, 2});
  const Tensor p = g.input("p", {4, 3});
  const Tensor logits = g.input("logits", {4, 3});
  const Tensor ids = g.input("ids", {4}, vkt::DType::I32);
  using vkt::test::error_of;
  CHECK_THAT(error_of([&] { vkt::mean_squared_error(y, p); }),
             Contains("mean_squared_error: labels 'y' [4, 2] and predictions 'p' [4, 3] must "
                      "have the same shape"));
  CHECK_THAT(error_of([&] { vkt::sigmoid_cross_entropy(y, logits); }),
             Contains("sigmoid_cross_entropy: labels 'y' [4, 2] and logits 'logits' [4, 3]"));
  CHECK_THAT(error_of([&] { vkt::absolute_difference(ids, ids); }),
             Contains("absolute_difference: labels 'ids' [4] hold i32 values; they must be f32"));
  CHECK_THAT(error_of([&] { vkt::huber(p, logits, {}, 0.0f); }), Contains("huber: delta is 0"));
  CHECK_THAT(error_of([&] { vkt::huber(p, logits, y); }),
             Contains("huber: weights 'y' [4, 2]") && Contains("[4, 3]"));
  CHECK_THAT(
      error_of([&] { vkt::sparse_softmax_cross_entropy(p, logits); }),
      Contains("sparse_softmax_cross_entropy: labels 'p' [4, 3] hold f32 values; they must be "
               "i32"));
  const Tensor ids5 = g.input("ids5", {5}, vkt::DType::I32);
  CHECK_THAT(error_of([&] { vkt::sparse_softmax_cross_entropy(ids5, logits); }),
             Contains("labels 'ids5' [5] must have the shape of logits 'logits' [4, 3] without "
                      "its last axis, [4]"));
  const Tensor flat = g.input("flat", {3});
  CHECK_THAT(error_of([&] { vkt::sparse_softmax_cross_entropy(ids, flat); }),
             Contains("logits 'flat' [3] need a batch axis"));
  const Tensor w3 = g.input("w3", {3});
  CHECK_THAT(error_of([&] { vkt::sparse_softmax_cross_entropy(ids, logits, w3); }),
             Contains("sparse_softmax_cross_entropy: weights 'w3' [3]") && Contains("[4]"));
  const Tensor row = g.input("row", {3});
  const Tensor w23 = g.input("w23", {2, 3});
  CHECK_THAT(error_of([&] { vkt::mean_squared_error(row, row, w23); }),
             Contains("weights 'w23' [2, 3] do not broadcast to the losses' shape [3]"));
  const Tensor wi = g.input("wi", {4}, vkt::DType::I32);
  CHECK_THAT(error_of([&] { vkt::sparse_softmax_cross_entropy(ids, logits, wi); }),
             Contains("weights 'wi' [4] hold i32 values"));
}
