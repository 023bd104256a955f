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

/// The number of elements of `t`, as a tensor (summed like the other counts).
Tensor count_of(const Tensor& t) {
  return t.graph().scalar(static_cast<float>(t.shape().elements()));
}

/// 1 where predictions >= threshold, else 0.
Tensor predicted_positive(const Tensor& predictions, float threshold) {
  return greater_equal(predictions, predictions.graph().scalar(threshold));
}

}  // namespace

Metric mean(const Tensor& values) {
  if (values.dtype() != DType::F32) throw Error("metrics::mean: the values must be f32");
  return {{reduce_sum(values), count_of(values)},
          [](const std::vector<std::vector<double>>& s) { return ratio(s[0][0], s[1][0]); }};
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
      reduce_sum(one_hot(labels, classes) * one_hot(argmax(logits, -1), classes));
  return {{correct, count_of(labels)},
          [](const std::vector<std::vector<double>>& s) { return ratio(s[0][0], s[1][0]); }};
}

Metric mean_squared_error(const Tensor& labels, const Tensor& predictions) {
  check_same(labels, predictions, "mean_squared_error");
  return {{reduce_sum(square(labels - predictions)), count_of(labels)},
          [](const std::vector<std::vector<double>>& s) { return ratio(s[0][0], s[1][0]); }};
}

Metric precision(const Tensor& labels, const Tensor& predictions, float threshold) {
  check_same(labels, predictions, "precision");
  const Tensor positive = predicted_positive(predictions, threshold);
  const Tensor tp = reduce_sum(positive * labels);
  return {{tp, reduce_sum(positive)},  // true positives, predicted positives
          [](const std::vector<std::vector<double>>& s) { return ratio(s[0][0], s[1][0]); }};
}

Metric recall(const Tensor& labels, const Tensor& predictions, float threshold) {
  check_same(labels, predictions, "recall");
  const Tensor tp = reduce_sum(predicted_positive(predictions, threshold) * labels);
  return {{tp, reduce_sum(labels)},  // true positives, actual positives
          [](const std::vector<std::vector<double>>& s) { return ratio(s[0][0], s[1][0]); }};
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
  const std::int64_t n = labels.shape().elements();
  const Tensor p = reshape(predictions, {n, 1});
  const Tensor y = reshape(labels, {n, 1});
  const Tensor above = greater(p, g.constant({1, thresholds}, t));  // [n, thresholds]
  const Tensor tp = reduce_sum(above * y, 0);
  const Tensor fp = reduce_sum(above * (g.scalar(1.0f) - y), 0);
  const Tensor positives = reduce_sum(y);
  const Tensor negatives = count_of(labels) - positives;
  return {{tp, fp, positives, negatives}, [thresholds](const std::vector<std::vector<double>>& s) {
            double area = 0;
            for (int i = 0; i + 1 < thresholds; ++i) {
              const double tpr0 = ratio(s[0][i], s[2][0]), tpr1 = ratio(s[0][i + 1], s[2][0]);
              const double fpr0 = ratio(s[1][i], s[3][0]), fpr1 = ratio(s[1][i + 1], s[3][0]);
              area += (fpr0 - fpr1) * (tpr0 + tpr1) / 2;
            }
            return area;
          }};
}

}  // namespace vkt::metrics
