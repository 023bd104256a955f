#pragma once
// Evaluation metrics as accumulators: per-batch sums that add up across towers
// and batches, so a metric over N towers equals the metric over the whole data.

#include <functional>
#include <string>
#include <vector>

#include "../runtime/graph/tensor.h"

namespace vkt {

/// A metric: tensors whose values are summed over towers and batches (counts,
/// totals, confusion counts), and the function that reads the metric from
/// those sums (one vector per accumulator).
///
/// With `per_example`, every accumulator is [B, ...]: one row of contributions
/// per example of the tower's batch, and the sums take only the rows of real
/// examples, so padding (the Estimator pads a short last batch) counts for
/// nothing. Every metric below is per-example when its inputs have a batch
/// dimension.
struct Metric {
  std::vector<Tensor> accumulators;
  std::function<double(const std::vector<std::vector<double>>& sums)> value;
  bool per_example = false;
};

namespace metrics {

/// The mean of every element of `values` (f32).
Metric mean(const Tensor& values);
/// Fraction of rows whose argmax of `logits` [B, C] equals `labels` (i32 [B]).
Metric accuracy(const Tensor& labels, const Tensor& logits);
/// Mean of (labels - predictions)^2 over every element (f32, same shape).
Metric mean_squared_error(const Tensor& labels, const Tensor& predictions);
/// Binary precision and recall of `predictions` (probabilities) >= threshold
/// against `labels` (0 or 1), both f32 of one shape.
Metric precision(const Tensor& labels, const Tensor& predictions, float threshold = 0.5f);
Metric recall(const Tensor& labels, const Tensor& predictions, float threshold = 0.5f);
/// ROC AUC as tf.metrics.auc computes it: confusion counts at `thresholds`
/// thresholds (0 - eps, i / (thresholds - 1) for i in 1..thresholds-2, 1 + eps),
/// trapezoids between consecutive (false positive rate, true positive rate) points.
Metric auc(const Tensor& labels, const Tensor& predictions, int thresholds = 200);

}  // namespace metrics
}  // namespace vkt
