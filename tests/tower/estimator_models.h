#pragma once
// The models, data and configuration the Estimator tests share: a small MLP
// trained with Adam, an identity model whose every figure has a host
// reference, labelled random data, and a quiet RunConfig.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <vktower/optimizers/adam.h>
#include <vktower/optimizers/sgd.h>
#include <vktower/optimizers/tower_optimizer.h>
#include <vktower/runtime/graph/ops/dropout.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/runtime/graph/ops/softmax.h>
#include <vktower/tower/estimator.h>

#include "../test_support.h"
#include "../tower_devices.h"

namespace vkt::test::estimator {

using vkt::HostTensor;
using vkt::Tensor;

inline constexpr std::int64_t kFeatures = 3, kClasses = 3;

inline std::vector<std::uint32_t> towers(int n) {
  return std::vector<std::uint32_t>(static_cast<std::size_t>(n), 0);
}

/// `rows` examples: x uniform in [-2, 2], y a class in [0, 3).
inline vkt::Dataset make_data(std::int64_t rows, std::uint32_t seed) {
  const std::vector<float> x =
      vkt::test::random_floats(static_cast<std::size_t>(rows * kFeatures), seed, -2.0f, 2.0f);
  std::vector<std::int32_t> y(static_cast<std::size_t>(rows));
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<std::int32_t>((i * 7 + seed) % 3);
  return vkt::Dataset(
      {{"x", HostTensor::floats({rows, kFeatures}, x)}, {"y", HostTensor::ints({rows}, y)}});
}

/// A small MLP trained with Adam at Params "lr" (0.05 when not given; 0
/// leaves the weights as initialised); Params "dropout" (a rate) drops from
/// its hidden layer.
inline vkt::EstimatorSpec mlp(vkt::ModelContext& ctx, const vkt::TensorDict& f,
                              const vkt::TensorDict& l, vkt::Mode mode, const vkt::Params& params) {
  Tensor h = vkt::layers::dense(f.at("x"), 8, vkt::layers::Activation::Relu, "hidden");
  if (params.count("dropout")) {
    h = vkt::dropout(h, static_cast<float>(std::get<double>(params.at("dropout"))));
  }
  const Tensor logits = vkt::layers::dense(h, kClasses, vkt::layers::Activation::None, "out");
  vkt::EstimatorSpec spec{.mode = mode};
  spec.predictions = {{"logits", logits}, {"class", vkt::argmax(logits, -1)}};
  if (mode == vkt::Mode::Predict) return spec;
  spec.loss = vkt::sparse_softmax_cross_entropy(l.at("y"), logits, ctx.example_weights(),
                                                vkt::Reduction::Mean);
  if (mode == vkt::Mode::Eval) {
    spec.eval_metric_ops = {{"accuracy", vkt::metrics::accuracy(l.at("y"), logits)}};
    return spec;
  }
  const auto lr =
      params.count("lr") ? static_cast<float>(std::get<double>(params.at("lr"))) : 0.05f;
  vkt::TowerOptimizer adam(std::make_unique<vkt::Adam>(lr));
  spec.train_op = adam.minimize(spec.loss);
  return spec;
}

/// logits = x * w with w [3] = 1: the logits are the features, so every
/// metric, loss and prediction has a host reference. SGD with rate 0 keeps it so.
inline vkt::EstimatorSpec identity(vkt::ModelContext& ctx, const vkt::TensorDict& f,
                                   const vkt::TensorDict& l, vkt::Mode mode, const vkt::Params&) {
  const Tensor w = ctx.graph().variable("w", {kFeatures}, vkt::Initializer::ones());
  const Tensor logits = f.at("x") * w;
  vkt::EstimatorSpec spec{.mode = mode};
  spec.predictions = {{"logits", logits}, {"class", vkt::argmax(logits, -1)}};
  if (mode == vkt::Mode::Predict) return spec;
  spec.loss = vkt::sparse_softmax_cross_entropy(l.at("y"), logits, ctx.example_weights(),
                                                vkt::Reduction::Mean);
  spec.eval_metric_ops = {{"accuracy", vkt::metrics::accuracy(l.at("y"), logits)},
                          {"mean_logit", vkt::metrics::mean(logits)}};
  if (mode == vkt::Mode::Train) {
    vkt::TowerOptimizer sgd(std::make_unique<vkt::SGD>(0.0f));
    spec.train_op = sgd.minimize(spec.loss);
  }
  return spec;
}

/// The Estimator tests' RunConfig: quiet_config with seed 5.
inline vkt::RunConfig quiet(const std::string& dir) {
  return quiet_config(dir, 5);
}

inline vkt::InputFn training_input(const vkt::Dataset& data, std::int64_t batch) {
  return vkt::dataset_input(
      data, {.batch_size = batch, .epochs = 0, .shuffle_seed = 11, .drop_remainder = true});
}

}  // namespace vkt::test::estimator
