#include "metrics.h"

#include <fmt/format.h>

#include "../runtime/graph/graph.h"
#include "../runtime/graph/ops/elementwise.h"
#include "../runtime/graph/ops/reduce.h"
#include "../runtime/graph/ops/shape_ops.h"
#include "../runtime/graph/ops/softmax.h"
#include "../runtime/vulkan/error.h"

namespace vkt::metrics {
namespace {

double ratio(double a, double b) {
  return b == 0 ? 0.0 : a / b;
}

void check_same(const Tensor& labels, const Tensor& predictions, const char* metric) {
  if (labels.shape() != predictions.shape() || labels.dtype() != DType::F32 ||
      predictions.dtype() != DType::F32) {
    throw Error(
        fmt::format("metrics::{}: labels '{}' {} and predictions '{}' {} must be f32 of "
                    "one shape",
                    metric, labels.name(), labels.shape().str(), predictions.name(),
                    predictions.shape().str()));
  }
}

/// Per example (dimension 0) of `x`: the sum of its elements, [B]. A scalar
/// `x` has no examples and is returned as is.
Tensor per_example_sum(const Tensor& x) {
  if (x.shape().rank() == 0) return x;
  const std::int64_t rows = x.shape()[0];
  return reduce_sum(reshape(x, {rows, x.shape().elements() / rows}), 1);
}

/// Per example of `x`: the number of its elements, [B] (a scalar for a scalar `x`).
Tensor per_example_count(const Tensor& x) {
  if (x.shape().rank() == 0) return x.graph().scalar(1.0f);
  const std::int64_t rows = x.shape()[0];
  const std::vector<float> counts(static_cast<std::size_t>(rows),
                                  static_cast<float>(x.shape().elements() / rows));
  return x.graph().constant({rows}, counts);
}

/// A metric of two per-example sums (or two totals for scalar inputs) and their ratio.
Metric ratio_metric(const Tensor& numerator, const Tensor& denominator, const Tensor& like) {
  return {{numerator, denominator},
          [](const std::vector<std::vector<double>>& s) { return ratio(s[0][0], s[1][0]); },
          like.shape().rank() > 0};
}

/// 1 where predictions >= threshold, else 0.
Tensor predicted_positive(const Tensor& predictions, float threshold) {
  return greater_equal(predictions, predictions.graph().scalar(threshold));
}

}  // namespace

Metric mean(const Tensor& values) {
  if (values.dtype() != DType::F32) throw Error("metrics::mean: the values must be f32");
  return ratio_metric(per_example_sum(values), per_example_count(values), values);
}

Metric accuracy(const Tensor& labels, const Tensor& logits) {
  if (logits.shape().rank() != 2 || labels.shape().rank() != 1 || labels.dtype() != DType::I32 ||
      labels.shape()[0] != logits.shape()[0]) {
    throw Error(
        fmt::format("metrics::accuracy: labels '{}' must be i32 [B] and logits '{}' [B, C]; "
                    "got {} and {}",
                    labels.name(), logits.name(), labels.shape().str(), logits.shape().str()));
  }
  const std::int64_t classes = logits.shape()[1];
  // Rows where the one-hot label and the one-hot prediction meet.
  const Tensor correct =
      per_example_sum(one_hot(labels, classes) * one_hot(argmax(logits, -1), classes));
  return ratio_metric(correct, per_example_count(labels), labels);
}

Metric mean_squared_error(const Tensor& labels, const Tensor& predictions) {
  check_same(labels, predictions, "mean_squared_error");
  return ratio_metric(per_example_sum(square(labels - predictions)), per_example_count(labels),
                      labels);
}

Metric precision(const Tensor& labels, const Tensor& predictions, float threshold) {
  check_same(labels, predictions, "precision");
  const Tensor positive = predicted_positive(predictions, threshold);
  // True positives over predicted positives.
  return ratio_metric(per_example_sum(positive * labels), per_example_sum(positive), labels);
}

Metric recall(const Tensor& labels, const Tensor& predictions, float threshold) {
  check_same(labels, predictions, "recall");
  // True positives over actual positives.
  return ratio_metric(per_example_sum(predicted_positive(predictions, threshold) * labels),
                      per_example_sum(labels), labels);
}

Metric auc(const Tensor& labels, const Tensor& predictions, int thresholds) {
  check_same(labels, predictions, "auc");
  if (thresholds < 3) throw Error("metrics::auc: needs at least 3 thresholds");
  Graph& g = labels.graph();
  constexpr float kEpsilon = 1e-7f;  // tf.metrics.auc's
  std::vector<float> t(static_cast<std::size_t>(thresholds));
  t.front() = -kEpsilon;
  t.back() = 1.0f + kEpsilon;
  for (int i = 1; i + 1 < thresholds; ++i) {
    t[static_cast<std::size_t>(i)] = static_cast<float>(i) / static_cast<float>(thresholds - 1);
  }
  // Per example (rows; one row for scalar inputs) and threshold: [rows, per_row, thresholds]
  // summed over the example's elements, so padding examples can be left out.
  const bool per_example = labels.shape().rank() > 0;
  const std::int64_t n = labels.shape().elements();
  const std::int64_t rows = per_example ? labels.shape()[0] : 1;
  const Tensor p = reshape(predictions, {n, 1});
  const Tensor y = reshape(labels, {n, 1});
  const Tensor above = greater(p, g.constant({1, thresholds}, t));  // [n, thresholds]
  const auto per_row = [&](const Tensor& x) {
    return reduce_sum(reshape(x, {rows, n / rows, thresholds}), 1);
  };
  const Tensor tp = per_row(above * y);
  const Tensor fp = per_row(above * (g.scalar(1.0f) - y));
  const Tensor yr = reshape(labels, {rows, n / rows});
  const Tensor positives = reduce_sum(yr, 1);
  const Tensor negatives = reduce_sum(g.scalar(1.0f) - yr, 1);
  return {{tp, fp, positives, negatives},
          [thresholds](const std::vector<std::vector<double>>& s) {
            double area = 0;
            for (int i = 0; i + 1 < thresholds; ++i) {
              const double tpr0 = ratio(s[0][i], s[2][0]), tpr1 = ratio(s[0][i + 1], s[2][0]);
              const double fpr0 = ratio(s[1][i], s[3][0]), fpr1 = ratio(s[1][i + 1], s[3][0]);
              area += (fpr0 - fpr1) * (tpr0 + tpr1) / 2;
            }
            return area;
          },
          per_example};
}

}  // namespace vkt::metrics
