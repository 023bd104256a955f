// A small image model with max and average pooling, flatten and layer norm,
// trained a few SGD steps on 2 towers, matches 1 tower on the same global
// batch: the pooling and layer-norm gradients shard over the batch correctly.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include <vktower/optimizers/sgd.h>
#include <vktower/optimizers/tower_optimizer.h>
#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/runtime/vulkan/instance.h>
#include <vktower/tower/replicate.h>
#include <vktower/tower/tower_run.h>

#include "../tower_devices.h"

using vkt::HostBatch;
using vkt::HostTensor;
using vkt::Tensor;

namespace {

constexpr std::int64_t kBatch = 8, kH = 7, kW = 5, kC = 3, kClasses = 4;
constexpr int kSteps = 4;

vkt::EstimatorSpec pool_model(vkt::ModelContext&, const vkt::TensorDict& f,
                              const vkt::TensorDict& l, vkt::Mode mode, const vkt::Params&) {
  namespace layers = vkt::layers;
  // [b, 7, 5, 3] -> max 3x3/2 same [b, 4, 3, 3] -> layer norm over channels
  // -> avg 2x2/1 [b, 3, 2, 3] -> flatten [b, 18] -> dense -> layer norm -> logits.
  const Tensor pooled = layers::max_pool2d(
      f.at("x"), {.window = {3, 3}, .strides = {2, 2}, .padding = vkt::Padding::Same});
  const Tensor normed = layers::layer_norm(pooled, 1e-5f, "ln_channels");
  const Tensor averaged = layers::avg_pool2d(normed, {.strides = {1, 1}});
  const Tensor h = layers::dense(layers::flatten(averaged), 16, layers::Activation::Tanh, "hidden");
  const Tensor logits = layers::dense(layers::layer_norm(h, 1e-5f, "ln_hidden"), kClasses,
                                      layers::Activation::None, "logits");
  const Tensor loss = vkt::sparse_softmax_cross_entropy(l.at("y"), logits);
  vkt::TowerOptimizer sgd(std::make_unique<vkt::SGD>(0.5f));
  return {.mode = mode, .loss = loss, .train_op = sgd.minimize(loss)};
}

std::vector<std::vector<float>> train(int towers, const std::vector<HostBatch>& xs,
                                      const std::vector<HostBatch>& ys) {
  vkt::Instance instance;
  const auto replicated =
      vkt::replicate_model_fn(pool_model, {.devices = std::vector<std::uint32_t>(towers, 0)});
  vkt::ModelContext root(instance, {{"x", {{kBatch, kH, kW, kC}}}},
                         {{"y", {{kBatch}, vkt::DType::I32}}}, {.seed = 3});
  root.set_device_pool(&vkt::test::tower_devices());
  vkt::EstimatorSpec spec = replicated(root, {}, {}, vkt::Mode::Train, {});
  for (int s = 0; s < kSteps; ++s) spec.run->train_step(xs[s], ys[s]);
  std::vector<std::vector<float>> vars;
  for (const char* name : {"ln_channels/gamma", "ln_channels/beta", "hidden/kernel", "hidden/bias",
                           "ln_hidden/gamma", "ln_hidden/beta", "logits/kernel", "logits/bias"}) {
    vars.push_back(spec.run->variable(name));
  }
  vars.push_back({spec.run->loss()});
  return vars;
}

}  // namespace

TEST_CASE("pooling and layer norm train the same on 2 towers as on 1", "[pool][layer_norm]") {
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<HostBatch> xs, ys;
  for (int s = 0; s < kSteps; ++s) {
    std::vector<float> x(kBatch * kH * kW * kC);
    for (float& v : x) v = normal(rng);
    std::vector<std::int32_t> y(kBatch);
    for (auto& v : y) v = static_cast<std::int32_t>(rng() % kClasses);
    xs.push_back({{"x", HostTensor::floats({kBatch, kH, kW, kC}, x)}});
    ys.push_back({{"y", HostTensor::ints({kBatch}, y)}});
  }
  const auto one = train(1, xs, ys);
  const auto two = train(2, xs, ys);
  for (std::size_t v = 0; v < one.size(); ++v) {
    INFO("variable " << v);
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < one[v].size(); ++i) {
      diff = std::max<double>(diff, std::abs(two[v][i] - one[v][i]));
      scale = std::max<double>(scale, std::abs(one[v][i]));
    }
    CHECK(diff <= 1e-5 * std::max(scale, 1.0));
  }
  // The model learned something: the gammas moved from their ones.
  CHECK(one[0] != std::vector<float>(kC, 1.0f));
}
