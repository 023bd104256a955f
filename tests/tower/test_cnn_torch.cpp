// A small CNN with batch norm (conv - bn - relu - pool, twice, then dense -
// dense) trained 10 steps with Adam on 1 tower, against PyTorch in float64
// from the same initial weights on the same batches (tests/torch_cnn_reference.py):
// every step's loss, every trainable variable and the moving statistics agree
// within 1e-4 (norm-wise relative). Skipped, with a warning, where no python3
// imports torch (python3-torch is an optional dependency: scripts/deps.sh).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <vktower/optimizers/adam.h>
#include <vktower/optimizers/tower_optimizer.h>
#include <vktower/runtime/graph/graph.h>
#include <vktower/runtime/graph/ops/batch_norm.h>
#include <vktower/runtime/graph/ops/conv.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/runtime/graph/ops/pool.h>
#include <vktower/runtime/graph/ops/shape_ops.h>
#include <vktower/runtime/io/npy.h>
#include <vktower/runtime/vulkan/instance.h>
#include <vktower/tower/replicate.h>
#include <vktower/tower/tower_run.h>

#include "../test_support.h"
#include "../torch_support.h"
#include "../tower_devices.h"

using vkt::HostTensor;
using vkt::Tensor;

namespace {

constexpr std::int64_t kBatch = 8, kSide = 8, kClasses = 3;
constexpr int kSteps = 10;

// The convolutions have no bias: batch norm's beta is their bias, and a bias
// before a batch norm gets a gradient of rounding noise only, which Adam
// would scale up to whole steps (float32 and float64 noise differ).
Tensor conv_bn_pool(const Tensor& x, std::int64_t filters, const std::string& name) {
  const Tensor kernel = x.graph().variable(name + "/kernel", {3, 3, x.shape()[3], filters},
                                           vkt::Initializer::glorot_uniform());
  const Tensor h = vkt::conv2d(x, kernel, {.padding = vkt::Padding::Same});
  const Tensor bn = vkt::layers::batch_norm(h, true, {.momentum = 0.9f, .name = name + "_bn"});
  return vkt::max_pool2d(vkt::relu(bn));
}

vkt::EstimatorSpec cnn(vkt::ModelContext&, const vkt::TensorDict& features,
                       const vkt::TensorDict& labels, vkt::Mode mode, const vkt::Params&) {
  namespace layers = vkt::layers;
  Tensor h = conv_bn_pool(features.at("x"), 4, "conv1");  // [8, 4, 4, 4]
  h = conv_bn_pool(h, 8, "conv2");                        // [8, 2, 2, 8]
  h = layers::dense(vkt::flatten(h), 16, layers::Activation::Relu, "dense");
  const Tensor logits = layers::dense(h, kClasses, layers::Activation::None, "logits");
  vkt::EstimatorSpec spec{.mode = mode, .predictions = {{"logits", logits}}};
  spec.loss = vkt::sparse_softmax_cross_entropy(labels.at("y"), logits);
  vkt::TowerOptimizer adam(std::make_unique<vkt::Adam>(0.01f));
  spec.train_op = adam.minimize(spec.loss);
  return spec;
}

// name -> shape of every variable compared (the moving statistics are not
// trained but follow the batches).
const std::map<std::string, std::vector<std::int64_t>> kVariables = {
    {"conv1/kernel", {3, 3, 1, 4}},
    {"conv1_bn/gamma", {4}},
    {"conv1_bn/beta", {4}},
    {"conv1_bn/moving_mean", {4}},
    {"conv1_bn/moving_variance", {4}},
    {"conv2/kernel", {3, 3, 4, 8}},
    {"conv2_bn/gamma", {8}},
    {"conv2_bn/beta", {8}},
    {"conv2_bn/moving_mean", {8}},
    {"conv2_bn/moving_variance", {8}},
    {"dense/kernel", {32, 16}},
    {"dense/bias", {16}},
    {"logits/kernel", {16, kClasses}},
    {"logits/bias", {kClasses}}};

std::string file_name(std::string name) {
  for (char& c : name) {
    if (c == '/') c = '.';
  }
  return name + ".npy";
}

std::string step_file(const std::string& what, int step) {
  return what + "." + std::to_string(step) + ".npy";
}

std::vector<std::int32_t> labels_of_step(int step) {
  std::vector<std::int32_t> y(kBatch);
  for (std::int64_t i = 0; i < kBatch; ++i) y[i] = static_cast<std::int32_t>((i * 7 + step) % 3);
  return y;
}

}  // namespace

TEST_CASE("a CNN with batch norm trained by Adam on 1 tower matches PyTorch in float64",
          "[torch][batch_norm][towers]") {
  const std::optional<std::string> python = vkt::test::torch_python();
  if (!python) {
    WARN(vkt::test::kNoTorch);
    return;
  }
  const vkt::test::TempDir dir;
  vkt::Instance instance;
  const auto replicated = vkt::replicate_model_fn(cnn, {.devices = {0}});
  vkt::ModelContext root(instance, {{"x", {{kBatch, kSide, kSide, 1}}}},
                         {{"y", {{kBatch}, vkt::DType::I32}}});
  root.set_device_pool(&vkt::test::tower_devices());
  const vkt::EstimatorSpec spec = replicated(root, {}, {}, vkt::Mode::Train, {});

  for (const auto& [name, shape] : kVariables) {
    vkt::write_npy((dir.path / ("init." + file_name(name))).string(), shape,
                   spec.run->variable(name));
  }
  std::vector<float> losses;
  for (int step = 0; step < kSteps; ++step) {
    const std::vector<float> x =
        vkt::test::random_floats(kBatch * kSide * kSide, 300 + step, 0.0f, 1.0f);
    const std::vector<std::int32_t> y = labels_of_step(step);
    vkt::write_npy((dir.path / step_file("x", step)).string(), {kBatch, kSide, kSide, 1}, x);
    vkt::write_npy((dir.path / step_file("y", step)).string(), {kBatch}, y);
    spec.run->train_step({{"x", HostTensor::floats({kBatch, kSide, kSide, 1}, x)}},
                         {{"y", HostTensor::ints({kBatch}, y)}});
    losses.push_back(spec.run->loss());
  }

  const std::string command =
      vkt::test::torch_reference_command(*python, "torch_cnn_reference.py", dir.path, kSteps);
  INFO(command);
  REQUIRE(std::system(command.c_str()) == 0);

  CHECK(vkt::test::norm_relative(losses, vkt::read_npy((dir.path / "loss.npy").string()).f32) <
        1e-4);
  for (const auto& [name, shape] : kVariables) {
    INFO(name);
    const vkt::NpyArray torch = vkt::read_npy((dir.path / ("final." + file_name(name))).string());
    CHECK(torch.shape == shape);
    CHECK(vkt::test::norm_relative(spec.run->variable(name), torch.f32) < 1e-4);
  }
}
