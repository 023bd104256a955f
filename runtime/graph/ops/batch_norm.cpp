// layers::batch_norm, composed of reduce, elementwise and cross-replica ops
// (their gradients give the batch-norm gradient), with moving-average updates.
#include "batch_norm.h"

#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "../../vulkan/error.h"
#include "../frozen_scope.h"
#include "../graph.h"
#include "cross_replica.h"
#include "elementwise.h"
#include "reduce.h"
#include "shape_ops.h"
#include "state_update.h"

namespace vkt::layers {
namespace {

struct Moments {
  Tensor mean;      // [1, C]
  Tensor variance;  // [1, C], biased
  Tensor unbiased;  // [1, C], for the moving variance
};

// One tower's shard: its own mean and variance.
Moments local_moments(const Tensor& x2) {
  const std::int64_t rows = x2.shape()[0];
  const Tensor mean = reduce_mean(x2, 0, true);
  const Tensor variance = reduce_mean(square(x2 - mean), 0, true);
  const float bessel =
      static_cast<float>(static_cast<double>(rows) / static_cast<double>(rows - 1));
  return {mean, variance, variance * bessel};
}

// The whole global batch: every tower's sums, sums of squares and row counts
// added up across the towers in one exchange.
Moments global_moments(const Tensor& x2) {
  Graph& g = x2.graph();
  const std::int64_t rows = x2.shape()[0], channels = x2.shape()[1];
  const std::vector<float> count(static_cast<std::size_t>(channels), static_cast<float>(rows));
  const Tensor sums = concat(
      {reduce_sum(x2, 0, true), reduce_sum(square(x2), 0, true), g.constant({1, channels}, count)},
      0);
  const std::vector<Tensor> total = split(cross_replica_sum(sums), {1, 1, 1}, 0);
  const Tensor n = total[2];
  const Tensor mean = total[0] / n;
  // E[x^2] - E[x]^2 may round below 0 for a constant channel.
  const Tensor variance = maximum(total[1] / n - square(mean), g.scalar(0.0f));
  return {mean, variance, variance * n / (n - 1.0f)};
}

}  // namespace

Tensor batch_norm(const Tensor& x, bool training, const BatchNorm& options) {
  if (!x.valid()) throw Error("layers::batch_norm: the input tensor is empty");
  const std::string what = fmt::format("layers::batch_norm('{}', '{}')", x.name(), options.name);
  if (x.dtype() != DType::F32 || x.shape().rank() < 2) {
    throw Error(fmt::format("{}: x must be an f32 tensor of rank 2 or more ([..., C]), got {} {}",
                            what, to_string(x.dtype()), x.shape().str()));
  }
  if (!(options.momentum >= 0.0f && options.momentum <= 1.0f) || !(options.epsilon > 0.0f) ||
      !std::isfinite(options.epsilon)) {
    throw Error(fmt::format("{}: momentum {} must lie in [0, 1] and epsilon {} be positive", what,
                            options.momentum, options.epsilon));
  }
  const std::int64_t channels = x.shape()[x.shape().rank() - 1];
  const std::int64_t rows = x.shape().elements() / channels;
  if (training && rows < 2 && !options.sync) {
    throw Error(fmt::format(
        "{}: training needs more than one value per channel, got x {}; use a larger batch", what,
        x.shape().str()));
  }
  Graph& g = x.graph();
  const Shape c{channels};
  const Tensor gamma = layer_weight(g.variable(options.name + "/gamma", c, Initializer::ones()));
  const Tensor beta = layer_weight(g.variable(options.name + "/beta", c, Initializer::zeros()));
  const Tensor moving_mean =
      g.variable(options.name + "/moving_mean", c, Initializer::zeros(), /*trainable=*/false);
  const Tensor moving_variance =
      g.variable(options.name + "/moving_variance", c, Initializer::ones(), /*trainable=*/false);
  if (!training) {
    return (x - moving_mean) * pow(moving_variance + options.epsilon, -0.5f) * gamma + beta;
  }
  const Tensor x2 = reshape(x, {rows, channels});
  const Moments m = options.sync ? global_moments(x2) : local_moments(x2);
  assign_moving_average(moving_mean, m.mean, options.momentum);
  assign_moving_average(moving_variance, m.unbiased, options.momentum);
  const Tensor y = (x2 - m.mean) * pow(m.variance + options.epsilon, -0.5f) * gamma + beta;
  return reshape(y, x.shape());
}

}  // namespace vkt::layers
