// Sparse softmax cross-entropy over a vocabulary: past a small loss's size it
// takes a workgroup per row of logits (shaders/xent_rows.comp), forward and
// backward, where the device runs rows by workgroup (a GPU; forced here). Against double precision,
// the same bits on a rerun, and each row's bits whatever other rows share its batch (so 1, 2 or 4
// towers give a row the same loss and gradient).
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <vector>

#include <vktower/runtime/graph/autodiff.h>
#include <vktower/runtime/graph/executor.h>
#include <vktower/runtime/graph/graph.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/runtime/graph/ops/reduce.h>

#include "../shared_device.h"
#include "../test_support.h"
#include "row_kernels_scope.h"

using vkt::Reduction;
using vkt::Tensor;

namespace {

// 193 classes: three full passes of the 64 lanes and a partial one; 400 rows
// of them, and a quarter of those, are past the fused loss's 16,384 elements.
constexpr std::int64_t kClasses = 193;

std::vector<std::int32_t> labels_of(std::int64_t rows) {
  std::vector<std::int32_t> labels(static_cast<std::size_t>(rows));
  for (std::size_t r = 0; r < labels.size(); ++r) {
    labels[r] = static_cast<std::int32_t>((r * 37 + 11) % kClasses);
  }
  return labels;
}

/// Loss per row, and its gradient wrt that row's logits, in double.
struct RowsReference {
  std::vector<double> loss, grad;  // grad: d loss_r / d x[r, :]
};

RowsReference reference(const std::vector<float>& x, const std::vector<std::int32_t>& labels) {
  RowsReference ref{std::vector<double>(labels.size()), std::vector<double>(x.size())};
  for (std::size_t r = 0; r < labels.size(); ++r) {
    const float* row = &x[r * kClasses];
    double m = -INFINITY, s = 0;
    for (std::int64_t k = 0; k < kClasses; ++k) m = std::max(m, double{row[k]});
    for (std::int64_t k = 0; k < kClasses; ++k) s += std::exp(row[k] - m);
    ref.loss[r] = std::log(s) + m - row[labels[r]];
    for (std::int64_t k = 0; k < kClasses; ++k) {
      const double p = std::exp(row[k] - m) / s;
      ref.grad[r * kClasses + static_cast<std::size_t>(k)] = k == labels[r] ? p - 1.0 : p;
    }
  }
  return ref;
}

/// Equal bit for bit (NaN rows included).
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// The loss (reduced as asked, with per-row weights or none) and the
/// gradient of its sum wrt the logits, run twice.
struct Run {
  std::vector<float> loss, grad;
  std::size_t loss_dispatches = 0;
};

Run run_loss(const std::vector<float>& x, const std::vector<std::int32_t>& labels,
             const std::vector<float>& weights, Reduction reduction) {
  vkt::Graph g(vkt::test::shared_device());
  const auto rows = static_cast<std::int64_t>(labels.size());
  const Tensor logits = g.input("logits", {rows, kClasses});
  const Tensor y = g.constant_i32({rows}, labels);
  const Tensor w = weights.empty() ? Tensor{} : g.constant({rows}, weights);
  const Tensor loss = vkt::sparse_softmax_cross_entropy(y, logits, w, reduction);
  const Tensor dx = vkt::gradients(vkt::reduce_sum(loss), {logits})[0].dense;
  const std::size_t base = vkt::Executor(g, {vkt::identity(logits)}).dispatch_count() - 1;
  Run first;
  for (int run = 0; run < 2; ++run) {
    vkt::Executor exec(g, {loss, dx});
    exec.feed("logits", x);
    exec.run();
    Run got{exec.read(loss), exec.read(dx), vkt::Executor(g, {loss}).dispatch_count() - base};
    if (run == 0) {
      first = got;
    } else {
      CHECK(same_bits(got.loss, first.loss));
      CHECK(same_bits(got.grad, first.grad));
    }
  }
  return first;
}

}  // namespace

TEST_CASE(
    "sparse_softmax_cross_entropy over 193 classes: a workgroup per row against double, the same "
    "bits on a rerun and whatever rows share the batch") {
  const vkt::test::RowKernelsScope scope("workgroup");
  constexpr std::int64_t kRows = 400;
  const std::vector<float> x = vkt::test::random_floats(kRows * kClasses, 3, -4.0f, 4.0f);
  const std::vector<std::int32_t> labels = labels_of(kRows);
  const std::vector<float> weights = vkt::test::random_floats(kRows, 4, 0.1f, 1.0f);
  const RowsReference ref = reference(x, labels);

  SECTION("per row, weighted: values and gradients, a row's bits in any batch") {
    const Run whole = run_loss(x, labels, weights, Reduction::None);
    CHECK(whole.loss_dispatches == 1);
    for (std::size_t r = 0; r < labels.size(); ++r) {
      INFO("row " << r);
      CHECK(whole.loss[r] == Approx(weights[r] * ref.loss[r]).epsilon(1e-5));
      for (std::size_t k = 0; k < kClasses; ++k) {
        const std::size_t i = r * kClasses + k;
        CHECK(std::abs(whole.grad[i] - weights[r] * ref.grad[i]) < 2e-7);
      }
    }
    // The batch as 2 and 4 towers see it: each quarter alone.
    for (const std::int64_t parts : {2, 4}) {
      const std::int64_t each = kRows / parts;
      for (std::int64_t p = 0; p < parts; ++p) {
        const auto from = static_cast<std::size_t>(p * each);
        const auto to = from + static_cast<std::size_t>(each);
        const Run part =
            run_loss(std::vector<float>(x.begin() + static_cast<std::ptrdiff_t>(from * kClasses),
                                        x.begin() + static_cast<std::ptrdiff_t>(to * kClasses)),
                     std::vector<std::int32_t>(labels.begin() + static_cast<std::ptrdiff_t>(from),
                                               labels.begin() + static_cast<std::ptrdiff_t>(to)),
                     std::vector<float>(weights.begin() + static_cast<std::ptrdiff_t>(from),
                                        weights.begin() + static_cast<std::ptrdiff_t>(to)),
                     Reduction::None);
        INFO(parts << " parts, part " << p);
        CHECK(part.loss ==
              std::vector<float>(whole.loss.begin() + static_cast<std::ptrdiff_t>(from),
                                 whole.loss.begin() + static_cast<std::ptrdiff_t>(to)));
        CHECK(part.grad ==
              std::vector<float>(whole.grad.begin() + static_cast<std::ptrdiff_t>(from * kClasses),
                                 whole.grad.begin() + static_cast<std::ptrdiff_t>(to * kClasses)));
      }
    }
  }
  SECTION("reduced: the rows' losses, then their sum in a second dispatch") {
    struct Case {
      Reduction reduction;
      bool weighted;
    };
    for (const Case c : {Case{Reduction::Sum, false}, Case{Reduction::Mean, true},
                         Case{Reduction::SumOverBatchSize, false}}) {
      INFO("reduction " << static_cast<int>(c.reduction) << ", weighted " << c.weighted);
      const Run got = run_loss(x, labels, c.weighted ? weights : std::vector<float>{}, c.reduction);
      double sum = 0, sum_w = 0;
      for (std::size_t r = 0; r < labels.size(); ++r) {
        const double w = c.weighted ? weights[r] : 1.0;
        sum += w * ref.loss[r];
        sum_w += w;
      }
      const double scale = c.reduction == Reduction::Sum ? 1.0 : 1.0 / sum_w;
      CHECK(got.loss[0] == Approx(scale * sum).epsilon(1e-5));
      CHECK(got.loss_dispatches == (c.weighted ? 4u : 2u));  // Mean: the weights' sum, a divide
      double worst = 0;
      for (std::size_t i = 0; i < got.grad.size(); ++i) {
        const double w = c.weighted ? weights[i / kClasses] : 1.0;
        worst = std::max(worst, std::abs(got.grad[i] - scale * w * ref.grad[i]));
      }
      CHECK(worst < 2e-7);
    }
  }
}

TEST_CASE("sparse_softmax_cross_entropy over 193 classes: a label out of range gives its row NaN") {
  const vkt::test::RowKernelsScope scope("workgroup");
  constexpr std::int64_t kRows = 100;
  const std::vector<float> x = vkt::test::random_floats(kRows * kClasses, 5);
  std::vector<std::int32_t> labels = labels_of(kRows);
  labels[7] = -1;
  labels[50] = kClasses;
  const Run got = run_loss(x, labels, {}, Reduction::None);
  const RowsReference ref = reference(x, labels_of(kRows));
  for (std::size_t r = 0; r < labels.size(); ++r) {
    INFO("row " << r);
    const bool bad = r == 7 || r == 50;
    CHECK(std::isnan(got.loss[r]) == bad);
    if (!bad) CHECK(got.loss[r] == Approx(ref.loss[r]).epsilon(1e-5));
    for (std::size_t k = 0; k < kClasses; ++k) {
      CHECK(std::isnan(got.grad[r * kClasses + k]) == bad);
    }
  }
}
