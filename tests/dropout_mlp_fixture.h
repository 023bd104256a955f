#pragma once
// The small classifier the Estimator tests train on several towers (resume on
// another count, lost devices, unequal shards): its data, the model (an MLP
// with a dropout, Adam); quiet_config (tower_devices.h) is its RunConfig.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <vktower/optimizers/adam.h>
#include <vktower/optimizers/tower_optimizer.h>
#include <vktower/runtime/graph/ops/dropout.h>
#include <vktower/runtime/graph/ops/embedding.h>
#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/runtime/graph/ops/shape_ops.h>
#include <vktower/runtime/io/dataset.h>
#include <vktower/tower/estimator.h>
#include <vktower/tower/metrics.h>

#include "test_support.h"
#include "tower_devices.h"

namespace vkt::test {

/// `rows` examples: "x", `features` values in [-2, 2) drawn from `seed`, and
/// "y", class (i * 7 + seed) % `classes` of example i.
inline Dataset classification_data(std::int64_t rows, std::int64_t features, std::int64_t classes,
                                   std::uint32_t seed) {
  const std::vector<float> x =
      random_floats(static_cast<std::size_t>(rows * features), seed, -2.0f, 2.0f);
  std::vector<std::int32_t> y(static_cast<std::size_t>(rows));
  for (std::size_t i = 0; i < y.size(); ++i) {
    y[i] = static_cast<std::int32_t>((i * 7 + seed) % static_cast<std::size_t>(classes));
  }
  return Dataset(
      {{"x", HostTensor::floats({rows, features}, x)}, {"y", HostTensor::ints({rows}, y)}});
}

struct DropoutMlp {
  std::int64_t hidden = 12;
  std::int64_t classes = 3;
  float dropout = 0.25f;
  float learning_rate = 0.02f;
  Reduction reduction = Reduction::Mean;
  /// Also an embedding table "emb" (10 x 3, sparse gradients) of feature
  /// "ids" ([batch, 2] ids below 10), concatenated to "x".
  bool embedding = false;
};

/// x -> dense `hidden` relu ("hidden") -> dropout -> dense `classes` ("out"):
/// logits as predictions, the sparse cross-entropy of "y" over the example
/// weights, Adam; accuracy when evaluating.
inline ModelFn dropout_mlp(DropoutMlp m = {}) {
  return [m](ModelContext& ctx, const TensorDict& f, const TensorDict& l, Mode mode,
             const Params&) {
    using layers::Activation;
    Tensor x = f.at("x");
    if (m.embedding) {
      const Tensor table = ctx.graph().variable("emb", {10, 3}, Initializer::normal(0.0f, 0.5f));
      const Tensor e = embedding_lookup(table, f.at("ids"));  // [b, 2, 3]
      x = concat({x, reshape(e, {x.shape()[0], 6})}, 1);
    }
    Tensor h = layers::dense(x, m.hidden, Activation::Relu, "hidden");
    h = dropout(h, m.dropout, 1);
    const Tensor logits = layers::dense(h, m.classes, Activation::None, "out");
    EstimatorSpec spec{.mode = mode};
    spec.predictions = {{"logits", logits}};
    if (mode == Mode::Predict) return spec;
    spec.loss = sparse_softmax_cross_entropy(l.at("y"), logits, ctx.example_weights(), m.reduction);
    if (mode == Mode::Eval)
      spec.eval_metric_ops = {{"accuracy", metrics::accuracy(l.at("y"), logits)}};
    if (mode == Mode::Train) {
      const float rate = m.learning_rate;
      TowerOptimizer adam([rate] { return std::make_unique<Adam>(rate); });
      spec.train_op = adam.minimize(spec.loss);
    }
    return spec;
  };
}

/// Training batches of `batch` from `data`, shuffled with seed 3, repeated.
inline InputFn training_batches(const Dataset& data, std::int64_t batch) {
  return dataset_input(
      data, {.batch_size = batch, .epochs = 0, .shuffle_seed = 3, .drop_remainder = true});
}

}  // namespace vkt::test
