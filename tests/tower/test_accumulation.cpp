// Gradient accumulation (Distribution::accumulate_steps, RunConfig::accumulate_steps):
// k micro-batches of B train the model one batch of kB would, on 1 and 2
// towers in every variable mode, with Sum and Mean reductions, dense and
// sparse gradients; the global step advances once per k.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <vktower/optimizers/adam.h>
#include <vktower/optimizers/sgd.h>
#include <vktower/optimizers/tower_optimizer.h>
#include <vktower/runtime/graph/ops/embedding.h>
#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/runtime/graph/ops/shape_ops.h>
#include <vktower/runtime/mpi/process_group.h>
#include <vktower/runtime/vulkan/error.h>
#include <vktower/runtime/vulkan/instance.h>
#include <vktower/tower/replicate.h>
#include <vktower/tower/tower_run.h>

#include "../test_support.h"
#include "../tower_devices.h"

using Catch::Matchers::Contains;
using vkt::HostBatch;
using vkt::HostTensor;
using vkt::Tensor;

namespace {

constexpr std::int64_t kMicro = 16, kSteps = 3, kIn = 5, kClasses = 4;
constexpr int kK = 4;  // micro-batches per step: 4 x 16 = 64
constexpr std::int64_t kIds = 3, kRows = 20, kDim = 6;

struct Setup {
  int towers = 1;
  vkt::VariableMode mode = vkt::VariableMode::SharedLocalParameterServer;
  vkt::LossReduction reduction = vkt::LossReduction::Mean;
  bool adam = true;
  bool embedding = false;  // a sparse (embedding) gradient besides the dense ones
  bool bad_batch = false;  // a bad batch offered part-way through a step
};

std::unique_ptr<vkt::Optimizer> make_optimizer(bool adam) {
  if (adam) return std::make_unique<vkt::Adam>(0.01f);
  return std::make_unique<vkt::SGD>(0.1f);
}

/// An MLP (or an embedding and a dense layer) whose tower loss is the mean
/// over the tower's shard.
vkt::ModelFn model(Setup setup) {
  return [setup](vkt::ModelContext& ctx, const vkt::TensorDict& f, const vkt::TensorDict& l,
                 vkt::Mode mode, const vkt::Params&) {
    Tensor logits;
    if (setup.embedding) {
      const Tensor table =
          ctx.graph().variable("emb", {kRows, kDim}, vkt::Initializer::normal(0.0f, 0.5f));
      const Tensor ids = f.at("ids");
      const Tensor e = vkt::embedding_lookup(table, ids);
      const Tensor flat = vkt::reshape(e, {ids.shape()[0], kIds * kDim});
      logits = vkt::layers::dense(flat, kClasses, vkt::layers::Activation::None, "out");
    } else {
      const Tensor h = vkt::layers::dense(f.at("x"), 12, vkt::layers::Activation::Tanh, "hidden");
      logits = vkt::layers::dense(h, kClasses, vkt::layers::Activation::None, "out");
    }
    const Tensor loss =
        vkt::sparse_softmax_cross_entropy(l.at("y"), logits, Tensor{}, vkt::Reduction::Mean);
    vkt::TowerOptimizer opt([setup] { return make_optimizer(setup.adam); });
    return vkt::EstimatorSpec{.mode = mode, .loss = loss, .train_op = opt.minimize(loss)};
  };
}

struct Batch {
  HostBatch features, labels;
};

/// `count` batches of `rows` examples, the same examples however they are cut.
std::vector<Batch> batches(const Setup& setup, std::int64_t rows, std::int64_t count) {
  std::mt19937 rng(23);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::int64_t total = rows * count;
  std::vector<float> x(static_cast<std::size_t>(total * kIn));
  for (float& v : x) v = normal(rng);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(total * kIds));
  for (auto& id : ids) id = static_cast<std::int32_t>(rng() % 7);  // repeats across shards
  std::vector<std::int32_t> y(static_cast<std::size_t>(total));
  for (auto& v : y) v = static_cast<std::int32_t>(rng() % kClasses);
  std::vector<Batch> out;
  for (std::int64_t b = 0; b < count; ++b) {
    const auto r = static_cast<std::size_t>(b * rows);
    Batch batch;
    if (setup.embedding) {
      batch.features["ids"] = HostTensor::ints(
          {rows, kIds},
          std::vector<std::int32_t>(ids.begin() + r * kIds, ids.begin() + (r + rows) * kIds));
    } else {
      batch.features["x"] = HostTensor::floats(
          {rows, kIn}, std::vector<float>(x.begin() + r * kIn, x.begin() + (r + rows) * kIn));
    }
    batch.labels["y"] =
        HostTensor::ints({rows}, std::vector<std::int32_t>(y.begin() + r, y.begin() + r + rows));
    out.push_back(std::move(batch));
  }
  return out;
}

std::shared_ptr<vkt::TowerRun> build(vkt::Instance& instance, const Setup& setup, std::int64_t rows,
                                     int accumulate, vkt::ProcessGroup* processes = nullptr) {
  const auto replicated = vkt::replicate_model_fn(
      model(setup),
      {.loss_reduction = setup.reduction,
       .devices = std::vector<std::uint32_t>(static_cast<std::size_t>(setup.towers), 0),
       .variable_mode = setup.mode,
       .bucket_bytes = 256});  // several buckets: the sums must not depend on them
  std::map<std::string, vkt::InputSpec> features;
  if (setup.embedding) {
    features["ids"] = {{rows, kIds}, vkt::DType::I32};
  } else {
    features["x"] = {{rows, kIn}};
  }
  vkt::ModelContext root(instance, features, {{"y", {{rows}, vkt::DType::I32}}}, {.seed = 5});
  root.set_device_pool(&vkt::test::tower_devices());
  root.set_distribution({.processes = processes, .accumulate_steps = accumulate});
  return replicated(root, {}, {}, vkt::Mode::Train, {}).run;
}

using vkt::test::norm_relative;

/// Trains kSteps steps of one batch of 64 and kSteps x 4 micro-batches of 16
/// on the same examples; every variable and slot ends within 1e-6 relative.
void check_equals_big_batch(const Setup& setup) {
  vkt::Instance instance;
  const std::vector<Batch> big = batches(setup, kMicro * kK, kSteps);
  const std::vector<Batch> micro = batches(setup, kMicro, kSteps * kK);
  const auto reference = build(instance, setup, kMicro * kK, 1);
  const auto accumulated = build(instance, setup, kMicro, kK);
  CHECK(accumulated->accumulate_steps() == kK);
  CHECK(accumulated->processes() == 1);
  for (std::int64_t s = 0; s < kSteps; ++s) {
    reference->train_step(big[s].features, big[s].labels);
    REQUIRE(reference->step_completed());
    for (int m = 0; m < kK; ++m) {
      const Batch& b = micro[static_cast<std::size_t>(s * kK + m)];
      if (setup.bad_batch && s == 1 && m == 2) {
        // Refused before any tower runs: the step's two micro-batches so far stay.
        HostBatch wrong = b.features;
        wrong["extra"] = b.labels.at("y");
        CHECK_THROWS_WITH(accumulated->train_step(wrong, b.labels), Contains("'extra'"));
        CHECK(accumulated->micro_batch() == 2);
      }
      accumulated->train_step(b.features, b.labels);
      // The global step advances once per k micro-batches, on the k-th.
      CHECK(accumulated->step_completed() == (m == kK - 1));
      CHECK(accumulated->micro_batch() == (m + 1) % kK);
      CHECK(accumulated->global_step() == static_cast<std::uint64_t>(m == kK - 1 ? s + 1 : s));
    }
    // The step's loss: what one batch of 64 reports (summed in another order).
    const float want = reference->loss();
    CHECK(std::abs(accumulated->loss() - want) <= 1e-5 * std::abs(want));
  }
  CHECK(reference->global_step() == kSteps);
  std::vector<std::string> names = {"out/kernel", "out/bias"};
  names.push_back(setup.embedding ? "emb" : "hidden/kernel");
  if (setup.adam) {
    names.push_back("out/kernel/Adam/m");
    names.push_back(setup.embedding ? "emb/Adam/v" : "hidden/bias/Adam/v");
  }
  for (const std::string& name : names) {
    INFO(name);
    const std::vector<float> want = reference->variable(name);
    const std::vector<float> got = accumulated->variable(name);
    CHECK(norm_relative(got, want) < 1e-6);
  }
  // It trained: the variables moved from their initial values.
  const auto fresh = build(instance, setup, kMicro, kK);
  CHECK(norm_relative(fresh->variable("out/kernel"), reference->variable("out/kernel")) > 1e-3);
}

void check_modes(int towers, bool adam) {
  using VM = vkt::VariableMode;
  using LR = vkt::LossReduction;
  for (const VM mode : {VM::SharedLocalParameterServer, VM::Mirrored, VM::RoundRobin}) {
    for (const LR reduction : {LR::Mean, LR::Sum}) {
      INFO(towers << " tower(s), variable mode " << static_cast<int>(mode) << ", reduction "
                  << static_cast<int>(reduction) << (adam ? ", Adam" : ", SGD"));
      check_equals_big_batch(
          {.towers = towers, .mode = mode, .reduction = reduction, .adam = adam});
    }
  }
}

}  // namespace

TEST_CASE("4 micro-batches of 16 equal one batch of 64 with Adam on 1 tower, every variable mode",
          "[accumulation]") {
  check_modes(1, true);
}

TEST_CASE("4 micro-batches of 16 equal one batch of 64 with Adam on 2 towers, every variable mode",
          "[accumulation]") {
  check_modes(2, true);
}

TEST_CASE("4 micro-batches of 16 equal one batch of 64 with SGD on 1 tower, every variable mode",
          "[accumulation]") {
  check_modes(1, false);
}

TEST_CASE("4 micro-batches of 16 equal one batch of 64 with SGD on 2 towers, every variable mode",
          "[accumulation]") {
  check_modes(2, false);
}

TEST_CASE("4 micro-batches of 16 equal one batch of 64 with a sparse embedding gradient",
          "[accumulation]") {
  for (const int towers : {1, 2}) {
    for (const bool adam : {true, false}) {
      INFO(towers << " tower(s)" << (adam ? ", Adam" : ", SGD"));
      check_equals_big_batch({.towers = towers, .adam = adam, .embedding = true});
    }
  }
}

TEST_CASE("a bad batch part-way through a step is refused and the step goes on", "[accumulation]") {
  check_equals_big_batch({.towers = 2, .bad_batch = true});
}

TEST_CASE("accumulate_steps below 1 is refused before anything is built", "[accumulation]") {
  vkt::Instance instance;
  for (const int k : {0, -3}) {
    INFO(k);
    CHECK_THROWS_WITH(
        build(instance, {}, kMicro, k),
        Contains("accumulate_steps is " + std::to_string(k)) && Contains("give 1 or more"));
  }
}

TEST_CASE("accumulation on one tower needs a TowerOptimizer", "[accumulation]") {
  vkt::Instance instance;
  const vkt::ModelFn plain = [](vkt::ModelContext&, const vkt::TensorDict& f,
                                const vkt::TensorDict& l, vkt::Mode mode, const vkt::Params&) {
    const Tensor logits = vkt::layers::dense(f.at("x"), kClasses, vkt::layers::Activation::None);
    const Tensor loss = vkt::sparse_softmax_cross_entropy(l.at("y"), logits);
    vkt::SGD sgd(0.1f);
    return vkt::EstimatorSpec{.mode = mode, .loss = loss, .train_op = sgd.minimize(loss)};
  };
  vkt::ModelContext root(instance, {{"x", {{kMicro, kIn}}}}, {{"y", {{kMicro}, vkt::DType::I32}}});
  root.set_device_pool(&vkt::test::tower_devices());
  root.set_distribution({.accumulate_steps = 2});
  CHECK_THROWS_WITH(
      vkt::replicate_model_fn(plain, {.devices = {0}})(root, {}, {}, vkt::Mode::Train, {}),
      Contains("without TowerOptimizer"));
}
