// Batch norm on several towers: synchronized batch norm makes N towers equal
// one tower on the whole batch (a small CNN, Adam, every variable mode); the
// unsynchronized moving averages follow tower 0; a resumed run is bit-exact;
// prediction normalizes with the moving statistics.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <vktower/optimizers/adam.h>
#include <vktower/optimizers/sgd.h>
#include <vktower/optimizers/tower_optimizer.h>
#include <vktower/runtime/graph/ops/batch_norm.h>
#include <vktower/runtime/graph/ops/conv.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/runtime/graph/ops/pool.h>
#include <vktower/runtime/graph/ops/shape_ops.h>
#include <vktower/runtime/vulkan/instance.h>
#include <vktower/tower/replicate.h>
#include <vktower/tower/tower_run.h>

#include "../test_support.h"
#include "../tower_devices.h"

using vkt::HostBatch;
using vkt::HostTensor;
using vkt::Tensor;

namespace {

constexpr std::int64_t kBatch = 8;

// conv 3x3x4 (same) - batch norm - relu - max pool - conv 3x3x4 - batch norm -
// relu - max pool - dense 8 - dense 3, on 6x6x2 images; sparse softmax
// cross-entropy.
// A convolution without bias, as before a batch norm (which takes the mean
// out: a bias there has a gradient of 0 up to rounding, which Adam would
// scale up into arbitrary steps).
Tensor conv(const Tensor& x, std::int64_t filters, const vkt::Conv2dOptions& options,
            const std::string& name) {
  const Tensor kernel = x.graph().variable(name + "/kernel", {3, 3, x.shape()[3], filters},
                                           vkt::Initializer::glorot_uniform());
  return vkt::conv2d(x, kernel, options);
}

// `batch_statistics`: normalize with the batch's statistics in every mode.
vkt::ModelFn cnn(bool sync, bool batch_statistics = false) {
  return [=](vkt::ModelContext&, const vkt::TensorDict& features, const vkt::TensorDict& labels,
             vkt::Mode mode, const vkt::Params&) {
    const bool training = mode == vkt::Mode::Train || batch_statistics;
    namespace layers = vkt::layers;
    Tensor h = conv(features.at("x"), 4, {.padding = vkt::Padding::Same}, "conv1");
    h = vkt::relu(layers::batch_norm(h, training, {.momentum = 0.9f, .sync = sync, .name = "bn1"}));
    h = layers::max_pool2d(h);  // 3x3
    h = conv(h, 4, {.padding = vkt::Padding::Same}, "conv2");
    h = vkt::relu(layers::batch_norm(h, training, {.momentum = 0.9f, .sync = sync, .name = "bn2"}));
    h = layers::max_pool2d(h, {.padding = vkt::Padding::Same});  // 2x2
    h = layers::dense(layers::flatten(h), 8, layers::Activation::Relu, "hidden");
    const Tensor logits = layers::dense(h, 3, layers::Activation::None, "logits");
    vkt::EstimatorSpec spec{.mode = mode, .predictions = {{"logits", logits}}};
    if (mode == vkt::Mode::Predict) return spec;
    spec.loss = vkt::sparse_softmax_cross_entropy(labels.at("y"), logits);
    vkt::TowerOptimizer adam(std::make_unique<vkt::Adam>(0.01f));
    spec.train_op = adam.minimize(spec.loss);
    return spec;
  };
}

struct Batch {
  HostBatch features, labels;
};

Batch batch(int k) {
  std::vector<std::int32_t> y(kBatch);
  for (std::int64_t i = 0; i < kBatch; ++i) y[i] = static_cast<std::int32_t>((i + k) % 3);
  return {{{"x", HostTensor::floats({kBatch, 6, 6, 2},
                                    vkt::test::random_floats(kBatch * 72, 100 + k, -1.0f, 2.0f))}},
          {{"y", HostTensor::ints({kBatch}, y)}}};
}

struct Model {
  vkt::Instance instance;
  vkt::EstimatorSpec spec;
  Model(const vkt::ModelFn& fn, int towers, vkt::VariableMode variable_mode,
        vkt::Mode mode = vkt::Mode::Train) {
    const auto replicated = vkt::replicate_model_fn(
        fn, {.devices = std::vector<std::uint32_t>(static_cast<std::size_t>(towers), 0),
             .variable_mode = variable_mode});
    vkt::ModelContext root(instance, {{"x", {{kBatch, 6, 6, 2}}}},
                           {{"y", {{kBatch}, vkt::DType::I32}}});
    root.set_device_pool(&vkt::test::tower_devices());
    spec = replicated(root, {}, {}, mode, {});
  }
  void train(int from, int to) {
    for (int k = from; k < to; ++k) {
      const Batch b = batch(k);
      spec.run->train_step(b.features, b.labels);
    }
  }
};

const std::vector<std::string> kVariables = {
    "conv1/kernel",        "bn1/gamma",     "bn1/beta",    "bn1/moving_mean",
    "bn1/moving_variance", "conv2/kernel",  "bn2/gamma",   "bn2/moving_mean",
    "bn2/moving_variance", "hidden/kernel", "hidden/bias", "logits/kernel",
    "logits/bias"};

}  // namespace

TEST_CASE("synchronized batch norm: a CNN on 2 and 4 towers equals 1 tower, every variable mode",
          "[batch_norm][towers]") {
  Model one(cnn(true), 1, vkt::VariableMode::SharedLocalParameterServer);
  one.train(0, 10);
  for (const auto mode : {vkt::VariableMode::SharedLocalParameterServer,
                          vkt::VariableMode::Mirrored, vkt::VariableMode::RoundRobin}) {
    for (const int towers : {2, 4}) {
      INFO(towers << " towers, variable mode " << static_cast<int>(mode));
      Model many(cnn(true), towers, mode);
      many.train(0, 10);
      CHECK(many.spec.run->global_step() == 10);
      for (const std::string& name : kVariables) {
        INFO(name);
        CHECK(vkt::test::norm_relative(many.spec.run->variable(name),
                                       one.spec.run->variable(name)) < 1e-5);
      }
    }
  }
}

TEST_CASE("unsynchronized batch norm: the moving averages follow tower 0's shard",
          "[batch_norm][towers]") {
  const auto fn = [](vkt::ModelContext&, const vkt::TensorDict& features,
                     const vkt::TensorDict& labels, vkt::Mode mode, const vkt::Params&) {
    const Tensor h = vkt::layers::batch_norm(features.at("x"), mode == vkt::Mode::Train,
                                             {.momentum = 0.5f, .name = "bn"});
    const Tensor p = vkt::layers::dense(h, 1, vkt::layers::Activation::None, "out");
    const Tensor loss = vkt::mean_squared_error(labels.at("y"), p);
    vkt::TowerOptimizer sgd(std::make_unique<vkt::SGD>(0.1f));
    return vkt::EstimatorSpec{.mode = mode, .loss = loss, .train_op = sgd.minimize(loss)};
  };
  vkt::Instance instance;
  const auto replicated =
      vkt::replicate_model_fn(fn, {.devices = std::vector<std::uint32_t>{0, 0}});
  vkt::ModelContext root(instance, {{"x", {{4, 2}}}}, {{"y", {{4, 1}}}});
  root.set_device_pool(&vkt::test::tower_devices());
  const vkt::EstimatorSpec spec = replicated(root, {}, {}, vkt::Mode::Train, {});
  // Tower 0 takes rows 0 and 1: means (1, 10) then (5, 0).
  const std::vector<float> x1{0, 9, 2, 11, 100, -50, 300, 70};
  const std::vector<float> x2{4, -1, 6, 1, -7, 7, 9, 9};
  const std::vector<float> y{1, 2, 3, 4};
  spec.run->train_step({{"x", HostTensor::floats({4, 2}, x1)}},
                       {{"y", HostTensor::floats({4, 1}, y)}});
  spec.run->train_step({{"x", HostTensor::floats({4, 2}, x2)}},
                       {{"y", HostTensor::floats({4, 1}, y)}});
  CHECK(spec.run->global_step() == 2);
  // m = 0.5 (0.5 * 0 + 0.5 * 1) + 0.5 * 5 = 2.75; 0.5 (0.5 * 0 + 0.5 * 10) + 0 = 2.5.
  CHECK(spec.run->variable("bn/moving_mean") == std::vector<float>{2.75f, 2.5f});
  // Unbiased variances of tower 0's two rows: (2, 2) then (2, 2): 0.25 + 0.25 2 + 0.5 2.
  CHECK(spec.run->variable("bn/moving_variance") == std::vector<float>{1.75f, 1.75f});
  // The copy-back carried tower 0's averages to tower 1.
  vkt::Graph& second = spec.run->tower_graph(1);
  CHECK(second.values(*second.find_variable("bn/moving_mean")) == std::vector<float>{2.75f, 2.5f});
}

TEST_CASE(
    "unsynchronized batch norm: towers on one shared Device, staged, wait on the host once a step "
    "and train what towers on their own Devices do",
    "[batch_norm][towers]") {
  // The new weights reach each tower after its own step has written its
  // moving averages: ordered on the device, not by the host waiting.
  const auto train = [](vkt::TowerDevices devices, bool staged, double* waits_per_step) {
    vkt::Instance instance;
    const auto replicated = vkt::replicate_model_fn(
        cnn(false), {.devices = std::vector<std::uint32_t>{0, 0},
                     .tower_devices = devices,
                     .device_options = vkt::DeviceOptions{.force_staging = staged}});
    vkt::ModelContext root(instance, {{"x", {{kBatch, 6, 6, 2}}}},
                           {{"y", {{kBatch}, vkt::DType::I32}}});
    root.set_device_pool(&vkt::test::tower_devices());
    const vkt::EstimatorSpec spec = replicated(root, {}, {}, vkt::Mode::Train, {});
    constexpr int kSteps = 10, kWarm = 3;
    std::uint64_t before = 0;
    for (int k = 0; k < kSteps; ++k) {
      if (k == kWarm) before = spec.run->host_waits().devices;
      const Batch b = batch(k);
      spec.run->train_step(b.features, b.labels);
    }
    if (waits_per_step != nullptr) {
      *waits_per_step =
          static_cast<double>(spec.run->host_waits().devices - before) / (kSteps - kWarm);
    }
    std::vector<std::vector<float>> values;
    for (const std::string& name : kVariables) values.push_back(spec.run->variable(name));
    return values;
  };
  double waits = 0;
  const auto shared = train(vkt::TowerDevices::Shared, true, &waits);
  CHECK(waits <= 1.0);
  CHECK(shared == train(vkt::TowerDevices::PerTower, false, nullptr));
}

TEST_CASE(
    "batch norm: a resumed run equals the uninterrupted one bit for bit, and prediction "
    "uses the moving statistics",
    "[batch_norm][towers]") {
  vkt::test::TempDir dir;
  const std::string path = (dir.path / "model.safetensors").string();
  Model straight(cnn(true), 2, vkt::VariableMode::SharedLocalParameterServer);
  straight.train(0, 6);
  Model first(cnn(true), 2, vkt::VariableMode::SharedLocalParameterServer);
  first.train(0, 3);
  first.spec.run->save(path);
  Model resumed(cnn(true), 2, vkt::VariableMode::SharedLocalParameterServer);
  resumed.spec.run->restore(path);
  resumed.train(3, 6);
  CHECK(resumed.spec.run->global_step() == 6);
  for (const std::string& name : kVariables) {
    INFO(name);
    CHECK(resumed.spec.run->variable(name) == straight.spec.run->variable(name));
  }

  // Prediction on 2 towers with the trained moving statistics equals a
  // 1-tower prediction, and differs from normalizing with the batch's own.
  straight.spec.run->save(path);
  const Batch b = batch(42);
  std::vector<std::vector<float>> logits;
  for (const int towers : {1, 2}) {
    Model predict(cnn(true), towers, vkt::VariableMode::SharedLocalParameterServer,
                  vkt::Mode::Predict);
    predict.spec.run->restore(path);
    logits.push_back(predict.spec.run->predict_step(b.features).at("logits").f32);
  }
  CHECK(vkt::test::norm_relative(logits[1], logits[0]) < 1e-6);
  Model other(cnn(true, true), 1, vkt::VariableMode::SharedLocalParameterServer,
              vkt::Mode::Predict);
  other.spec.run->restore(path);
  CHECK(vkt::test::norm_relative(other.spec.run->predict_step(b.features).at("logits").f32,
                                 logits[0]) > 1e-3);
}
