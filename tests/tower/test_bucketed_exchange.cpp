// The gradient exchange in buckets that overlap the backward pass gives the
// same bits as one bucket exchanged after it, wherever the consolidation work
// runs and whichever path (mapped memory or staging copies) the bytes take.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <random>

#include <vktower/optimizers/adam.h>
#include <vktower/optimizers/sgd.h>
#include <vktower/optimizers/tower_optimizer.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/embedding.h>
#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/runtime/graph/ops/matmul.h>
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

constexpr std::int64_t kBatch = 12, kIds = 2, kRows = 10, kDim = 4, kHidden = 8, kClasses = 3;

// Two optimizer calls: Adam on the embedding (sparse where the mode allows it)
// and the hidden layer, SGD with momentum on the output layer.
vkt::ModelFn model(bool sparse) {
  return [sparse](vkt::ModelContext& ctx, const vkt::TensorDict& f, const vkt::TensorDict& l,
                  vkt::Mode mode, const vkt::Params&) {
    const Tensor x = f.at("x");
    Tensor table, features;
    if (sparse) {
      table = ctx.graph().variable("emb", {kRows, kDim}, vkt::Initializer::normal(0.0f, 0.5f));
      const Tensor e = vkt::embedding_lookup(table, f.at("ids"));
      features = vkt::reshape(e, {x.shape()[0], kIds * kDim}) +
                 vkt::layers::dense(x, kIds * kDim, vkt::layers::Activation::Tanh, "in");
    } else {  // the same first layer, dense
      table = ctx.graph().variable("emb", {5, kIds * kDim}, vkt::Initializer::normal(0.0f, 0.5f));
      features = vkt::tanh(vkt::matmul(x, table));
    }
    const Tensor h = vkt::layers::dense(features, kHidden, vkt::layers::Activation::Relu, "hidden");
    const Tensor logits = vkt::layers::dense(h, kClasses, vkt::layers::Activation::None, "out");
    const Tensor loss = vkt::sparse_softmax_cross_entropy(l.at("y"), logits);
    std::vector<Tensor> first{table}, second;
    for (const vkt::Variable& v : ctx.graph().variables()) {
      if (v.tensor.name().rfind("out/", 0) == 0) {
        second.push_back(v.tensor);
      } else if (v.tensor.name() != "emb") {
        first.push_back(v.tensor);
      }
    }
    vkt::TowerOptimizer adam([] { return std::make_unique<vkt::Adam>(0.02); });
    vkt::TowerOptimizer sgd(
        [] { return std::make_unique<vkt::SGD>(0.1, vkt::SGDOptions{.momentum = 0.9}); });
    adam.minimize(loss, first);
    return vkt::EstimatorSpec{.mode = mode, .loss = loss, .train_op = sgd.minimize(loss, second)};
  };
}

struct Config {
  std::size_t bucket_bytes;
  vkt::ConsolidationPlacement placement;
  bool staged;
  std::uint64_t binding_limit = 0;  // DeviceOptions::max_storage_buffer_range
  vkt::TowerDevices tower_devices = vkt::TowerDevices::PerTower;
  bool import_host_memory = false;  // staged copies through host memory every side imports
};

std::map<std::string, std::vector<float>> train(vkt::VariableMode mode, int towers,
                                                const Config& config, int* buckets = nullptr,
                                                bool bad_batches = false) {
  const bool sparse = mode == vkt::VariableMode::SharedLocalParameterServer;
  vkt::Instance instance;
  const auto replicated = vkt::replicate_model_fn(
      model(sparse),
      {.devices = std::vector<std::uint32_t>(static_cast<std::size_t>(towers), 0),
       .variable_mode = mode,
       .consolidation_placement = config.placement,
       .bucket_bytes = config.bucket_bytes,
       .tower_devices = config.tower_devices,
       .device_options = vkt::DeviceOptions{.force_staging = config.staged,
                                            .import_host_memory = config.import_host_memory,
                                            .max_storage_buffer_range = config.binding_limit}});
  std::map<std::string, vkt::InputSpec> inputs{{"x", {{kBatch, 5}}}};
  if (sparse) inputs["ids"] = {{kBatch, kIds}, vkt::DType::I32};
  vkt::ModelContext root(instance, inputs, {{"y", {{kBatch}, vkt::DType::I32}}}, {.seed = 5});
  root.set_device_pool(&vkt::test::tower_devices());
  vkt::EstimatorSpec spec = replicated(root, {}, {}, vkt::Mode::Train, {});
  std::mt19937 rng(3);
  for (int step = 0; step < 3; ++step) {
    std::vector<float> x(kBatch * 5);
    std::vector<std::int32_t> ids(kBatch * kIds), y(kBatch);
    for (float& v : x) v = static_cast<float>(rng() % 200) / 100.0f - 1.0f;
    for (auto& id : ids) id = static_cast<std::int32_t>(rng() % 4);  // repeats across towers
    for (auto& v : y) v = static_cast<std::int32_t>(rng() % kClasses);
    HostBatch features{{"x", HostTensor::floats({kBatch, 5}, x)}};
    if (sparse) features["ids"] = HostTensor::ints({kBatch, kIds}, ids);
    if (bad_batches) {  // refused before any tower runs; the run goes on unchanged
      HostBatch wrong = features;
      wrong["x"] = HostTensor::ints({kBatch, 5}, std::vector<std::int32_t>(kBatch * 5, 1));
      CHECK_THROWS_WITH(spec.run->train_step(wrong, {{"y", HostTensor::ints({kBatch}, y)}}),
                        Catch::Matchers::Contains("the batch's 'x' holds i32 values"));
      HostBatch extra = features;
      extra["z"] = HostTensor::floats({kBatch}, std::vector<float>(kBatch, 0.0f));
      CHECK_THROWS_WITH(spec.run->train_step(extra, {{"y", HostTensor::ints({kBatch}, y)}}),
                        Catch::Matchers::Contains("entry 'z' that the model has no input for"));
    }
    spec.run->train_step(features, {{"y", HostTensor::ints({kBatch}, y)}});
  }
  if (buckets) *buckets = spec.run->buckets();
  std::map<std::string, std::vector<float>> values;
  for (const vkt::Variable& v : spec.run->tower_graph(0).variables()) {
    values[v.tensor.name()] = spec.run->variable(v.tensor.name());
  }
  values["__loss"] = {spec.run->loss()};
  return values;
}

void check_same_bits(vkt::VariableMode mode) {
  // One tower has no exchange to bucket (both runs take the same path): an
  // even and an odd count of towers.
  const int towers = GENERATE(2, 3);
  INFO(towers << " towers");
  using P = vkt::ConsolidationPlacement;
  const auto sequential = train(mode, towers, {std::size_t{1} << 30, P::SeparateDevice, false});
  int buckets = 0;
  // The fourth: every binding at most 1 KiB, so the sums and the updates are
  // cut into windows (a device with a small maxStorageBufferRange). The last
  // two but one: the towers on one shared Device, every copy a device copy;
  // the last: staged copies through host memory both sides import.
  const auto shared = vkt::TowerDevices::Shared;
  for (const Config& c :
       {Config{16, P::OnTowerDevice, false}, Config{16, P::SeparateDevice, true},
        Config{200, P::OnTowerDevice, true},
        Config{std::size_t{1} << 30, P::OnTowerDevice, true,
               vkt::DeviceOptions::kMinStorageBufferRange},
        Config{16, P::OnTowerDevice, true, 0, shared},
        Config{200, P::SeparateDevice, false, 0, shared},
        Config{16, P::SeparateDevice, true, 0, vkt::TowerDevices::PerTower, true}}) {
    INFO("bucket bytes " << c.bucket_bytes << ", on tower device "
                         << (c.placement == P::OnTowerDevice) << ", staged " << c.staged
                         << ", binding limit " << c.binding_limit << ", shared device "
                         << (c.tower_devices == shared) << ", host memory imported "
                         << c.import_host_memory);
    const auto overlapped = train(mode, towers, c, &buckets);
    // Every gradient (16 bytes and more) a bucket of its own.
    if (towers > 1 && c.bucket_bytes == 16) CHECK(buckets >= 4);
    REQUIRE(overlapped.size() == sequential.size());
    for (const auto& [name, values] : sequential) {
      INFO(name);
      CHECK(overlapped.at(name) == values);  // bit for bit
    }
  }
}

}  // namespace

TEST_CASE("bucketed overlapped exchange equals one bucket bit for bit: SharedLocalParameterServer",
          "[towers]") {
  check_same_bits(vkt::VariableMode::SharedLocalParameterServer);
}

TEST_CASE("bucketed overlapped exchange equals one bucket bit for bit: Mirrored", "[towers]") {
  check_same_bits(vkt::VariableMode::Mirrored);
}

TEST_CASE("bucketed overlapped exchange equals one bucket bit for bit: RoundRobin", "[towers]") {
  check_same_bits(vkt::VariableMode::RoundRobin);
}

TEST_CASE("a batch the model cannot take is refused before any tower runs, changing nothing",
          "[towers]") {
  using P = vkt::ConsolidationPlacement;
  const Config config{16, P::OnTowerDevice, false};
  for (const auto mode : {vkt::VariableMode::SharedLocalParameterServer,
                          vkt::VariableMode::Mirrored, vkt::VariableMode::RoundRobin}) {
    const auto clean = train(mode, 2, config);
    const auto after_errors = train(mode, 2, config, nullptr, /*bad_batches=*/true);
    for (const auto& [name, values] : clean) {
      INFO(name);
      CHECK(after_errors.at(name) == values);
    }
  }
}

TEST_CASE("the next batch fed while a step runs trains to the same bits as feeding it then",
          "[towers]") {
  const int towers = GENERATE(1, 2);
  const bool staged = GENERATE(false, true);
  INFO(towers << " towers, staged " << staged);
  std::mt19937 rng(9);
  std::vector<HostBatch> features, labels;
  for (int s = 0; s < 4; ++s) {
    std::vector<float> x(kBatch * 5);
    std::vector<std::int32_t> ids(kBatch * kIds), y(kBatch);
    for (float& v : x) v = static_cast<float>(rng() % 200) / 100.0f - 1.0f;
    for (auto& id : ids) id = static_cast<std::int32_t>(rng() % 4);
    for (auto& v : y) v = static_cast<std::int32_t>(rng() % kClasses);
    features.push_back({{"x", HostTensor::floats({kBatch, 5}, x)},
                        {"ids", HostTensor::ints({kBatch, kIds}, ids)}});
    labels.push_back({{"y", HostTensor::ints({kBatch}, y)}});
  }
  const auto run = [&](bool ahead) {
    vkt::Instance instance;
    const auto replicated = vkt::replicate_model_fn(
        model(true), {.devices = std::vector<std::uint32_t>(static_cast<std::size_t>(towers), 0),
                      .device_options = vkt::DeviceOptions{.force_staging = staged}});
    vkt::ModelContext root(instance,
                           {{"x", {{kBatch, 5}}}, {"ids", {{kBatch, kIds}, vkt::DType::I32}}},
                           {{"y", {{kBatch}, vkt::DType::I32}}}, {.seed = 5});
    root.set_device_pool(&vkt::test::tower_devices());
    vkt::EstimatorSpec spec = replicated(root, {}, {}, vkt::Mode::Train, {});
    std::vector<float> losses;
    if (!ahead) {
      for (std::size_t s = 0; s < features.size(); ++s) {
        spec.run->train_step(features[s], labels[s]);
        losses.push_back(spec.run->loss());
      }
    } else {
      CHECK_THROWS_WITH(spec.run->train_step_fed(), Catch::Matchers::Contains("no batch was fed"));
      spec.run->train_step(features[0], labels[0], &features[1], &labels[1]);
      losses.push_back(spec.run->loss());
      spec.run->train_step_fed(&features[2], &labels[2]);
      losses.push_back(spec.run->loss());
      spec.run->train_step_fed(&features[3], &labels[3]);
      losses.push_back(spec.run->loss());
      spec.run->train_step_fed();
      losses.push_back(spec.run->loss());
      CHECK_THROWS_WITH(spec.run->train_step_fed(), Catch::Matchers::Contains("no batch was fed"));
    }
    losses.push_back(static_cast<float>(spec.run->global_step()));
    for (const vkt::Variable& v : spec.run->tower_graph(0).variables()) {
      const std::vector<float> values = spec.run->variable(v.tensor.name());
      losses.insert(losses.end(), values.begin(), values.end());
    }
    return losses;
  };
  CHECK(run(true) == run(false));
}

TEST_CASE("towers on one shared Device wait on the host once a step, staged, and take late losses",
          "[towers]") {
  const auto mode = GENERATE(vkt::VariableMode::SharedLocalParameterServer,
                             vkt::VariableMode::Mirrored, vkt::VariableMode::RoundRobin);
  const int towers = GENERATE(1, 2, 4);
  const int accumulate = GENERATE(1, 2);
  INFO("variable mode " << static_cast<int>(mode) << ", " << towers << " towers, " << accumulate
                        << " micro-batches a step");
  const bool sparse = mode == vkt::VariableMode::SharedLocalParameterServer;
  constexpr int kCalls = 12;
  std::mt19937 rng(4);
  std::vector<HostBatch> features, labels;
  for (int s = 0; s < kCalls; ++s) {
    std::vector<float> x(kBatch * 5);
    std::vector<std::int32_t> ids(kBatch * kIds), y(kBatch);
    for (float& v : x) v = static_cast<float>(rng() % 200) / 100.0f - 1.0f;
    for (auto& id : ids) id = static_cast<std::int32_t>(rng() % 4);
    for (auto& v : y) v = static_cast<std::int32_t>(rng() % kClasses);
    features.push_back({{"x", HostTensor::floats({kBatch, 5}, x)}});
    if (sparse) features.back()["ids"] = HostTensor::ints({kBatch, kIds}, ids);
    labels.push_back({{"y", HostTensor::ints({kBatch}, y)}});
  }
  // Late: each call then take_losses(2), counting the host waits; else loss()
  // after every completed step.
  const auto train_all = [&](bool late, double* waits_per_call) {
    vkt::Instance instance;
    const auto replicated = vkt::replicate_model_fn(
        model(sparse), {.devices = std::vector<std::uint32_t>(static_cast<std::size_t>(towers), 0),
                        .variable_mode = mode,
                        .bucket_bytes = 16,  // many buckets
                        .tower_devices = vkt::TowerDevices::Shared,
                        .device_options = vkt::DeviceOptions{.force_staging = true}});
    std::map<std::string, vkt::InputSpec> inputs{{"x", {{kBatch, 5}}}};
    if (sparse) inputs["ids"] = {{kBatch, kIds}, vkt::DType::I32};
    vkt::ModelContext root(instance, inputs, {{"y", {{kBatch}, vkt::DType::I32}}}, {.seed = 5});
    root.set_device_pool(&vkt::test::tower_devices());
    root.set_distribution({.accumulate_steps = accumulate});
    vkt::EstimatorSpec spec = replicated(root, {}, {}, vkt::Mode::Train, {});
    std::vector<vkt::TowerRun::StepLoss> losses;
    std::uint64_t waits_before = 0;
    for (int call = 0; call < kCalls; ++call) {
      if (call == 4) waits_before = spec.run->host_waits().devices;  // after the first steps
      spec.run->train_step(features[call], labels[call]);
      if (late) {
        for (const auto& l : spec.run->take_losses(2)) losses.push_back(l);
      } else if (spec.run->step_completed()) {
        losses.push_back({spec.run->global_step(), spec.run->loss()});
      }
    }
    if (waits_per_call) {
      *waits_per_call =
          static_cast<double>(spec.run->host_waits().devices - waits_before) / (kCalls - 4);
    }
    // Late: the last two steps' losses; else the last kKeptSteps (older ones
    // never taken were dropped), each as loss() gave it.
    const std::vector<vkt::TowerRun::StepLoss> rest = spec.run->take_losses();
    if (late) {
      losses.insert(losses.end(), rest.begin(), rest.end());
    } else {
      REQUIRE(rest.size() == vkt::TowerRun::kKeptSteps);
      for (std::size_t k = 0; k < rest.size(); ++k) {
        const auto& kept = losses[losses.size() - rest.size() + k];
        CHECK(rest[k].step == kept.step);
        CHECK(rest[k].loss == kept.loss);
      }
    }
    CHECK(spec.run->take_losses().empty());
    std::vector<float> values;
    for (const auto& l : losses) {
      values.push_back(static_cast<float>(l.step));
      values.push_back(l.loss);
    }
    for (const vkt::Variable& v : spec.run->tower_graph(0).variables()) {
      const std::vector<float> w = spec.run->variable(v.tensor.name());
      values.insert(values.end(), w.begin(), w.end());
    }
    return values;
  };
  double waits = 0;
  const std::vector<float> late = train_all(true, &waits);
  CHECK(waits <= 1.0);
  const std::vector<float> at_once = train_all(false, nullptr);
  REQUIRE(late.size() == at_once.size());
  CHECK(late == at_once);  // every step's loss, in order, and the weights: bit for bit
}
