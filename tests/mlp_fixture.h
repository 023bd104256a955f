#pragma once
// The small MLP the towers tests train (N towers against 1, precisions,
// allocations) and its random batches.

#include <cstdint>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include <vktower/optimizers/adam.h>
#include <vktower/optimizers/tower_optimizer.h>
#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/runtime/graph/precision_scope.h>
#include <vktower/tower/metrics.h>
#include <vktower/tower/model_fn.h>

namespace vkt::test {

inline constexpr std::int64_t kMlpClasses = 5;

/// adam_mlp's loss and training or evaluation on its `logits`.
inline EstimatorSpec adam_mlp_spec(const Tensor& logits, const TensorDict& l, Mode mode) {
  const Tensor loss = sparse_softmax_cross_entropy(l.at("y"), logits);
  EstimatorSpec spec{.mode = mode, .loss = loss};
  if (mode == Mode::Train) {
    TowerOptimizer adam([] { return std::make_unique<Adam>(0.01f); });
    spec.train_op = adam.minimize(loss);
  } else {
    spec.eval_metric_ops = {{"accuracy", metrics::accuracy(l.at("y"), logits)}};
  }
  return spec;
}

/// adam_mlp's two layers.
inline Tensor adam_mlp_logits(const TensorDict& f) {
  const Tensor h = layers::dense(f.at("x"), 16, layers::Activation::Tanh, "hidden");
  return layers::dense(h, kMlpClasses, layers::Activation::None, "out");
}

/// x -> dense 16 tanh ("hidden") -> dense kMlpClasses ("out"), sparse softmax
/// cross-entropy on labels "y", Adam at 0.01; accuracy when evaluating.
inline EstimatorSpec adam_mlp(ModelContext&, const TensorDict& f, const TensorDict& l, Mode mode,
                              const Params&) {
  return adam_mlp_spec(adam_mlp_logits(f), l, mode);
}

/// adam_mlp with its two layers built in a PrecisionScope of `precision`, the
/// loss and its gradients after the scope has gone.
inline ModelFn adam_mlp_scoped(Precision precision) {
  return [precision](ModelContext& ctx, const TensorDict& f, const TensorDict& l, Mode mode,
                     const Params&) {
    Tensor logits;
    {
      const PrecisionScope scope(ctx.graph(), precision);
      logits = adam_mlp_logits(f);
    }
    return adam_mlp_spec(logits, l, mode);
  };
}

/// One batch for adam_mlp drawn from `rng`: `rows` x `in` standard normal
/// features "x", then `rows` class labels "y".
inline std::pair<HostBatch, HostBatch> random_mlp_batch(std::mt19937& rng, std::int64_t rows,
                                                        std::int64_t in) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<std::size_t>(rows * in));
  for (float& v : x) v = normal(rng);
  std::vector<std::int32_t> y(static_cast<std::size_t>(rows));
  for (auto& v : y) v = static_cast<std::int32_t>(rng() % kMlpClasses);
  return {{{"x", HostTensor::floats({rows, in}, x)}}, {{"y", HostTensor::ints({rows}, y)}}};
}

/// `steps` batches of random_mlp_batch from one generator seeded `seed`.
struct MlpBatches {
  std::vector<HostBatch> xs, ys;
  MlpBatches(int steps, std::uint32_t seed, std::int64_t rows, std::int64_t in) {
    std::mt19937 rng(seed);
    for (int s = 0; s < steps; ++s) {
      auto [x, y] = random_mlp_batch(rng, rows, in);
      xs.push_back(std::move(x));
      ys.push_back(std::move(y));
    }
  }
};

}  // namespace vkt::test
