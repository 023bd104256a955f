// Sparse (embedding) gradients on several towers: the towers' rows are
// concatenated in tower order on the master (as TensorFlow concatenates
// IndexedSlices), so N towers train the same model as 1 tower on the whole batch.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <random>

#include <vktower/optimizers/adam.h>
#include <vktower/optimizers/sgd.h>
#include <vktower/optimizers/tower_optimizer.h>
#include <vktower/runtime/graph/ops/embedding.h>
#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/runtime/graph/ops/shape_ops.h>
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

constexpr std::int64_t kBatch = 8, kIds = 3, kRows = 20, kDim = 6, kClasses = 4;
constexpr std::int32_t kUsedRows = 12;  // ids are drawn from [0, 12): rows 12.. stay untouched

struct Setup {
  bool adam = true;
  bool sum = false;             // LossReduction::Sum and a summed loss (else the defaults)
  bool embedding_only = false;  // train the table alone
};

vkt::ModelFn model(Setup setup) {
  return [setup](vkt::ModelContext& ctx, const vkt::TensorDict& f, const vkt::TensorDict& l,
                 vkt::Mode mode, const vkt::Params&) {
    const Tensor table =
        ctx.graph().variable("emb", {kRows, kDim}, vkt::Initializer::normal(0.0f, 0.5f));
    const Tensor ids = f.at("ids");
    const Tensor e = vkt::embedding_lookup(table, ids);  // [b, kIds, kDim]
    const Tensor flat = vkt::reshape(e, {ids.shape()[0], kIds * kDim});
    const Tensor logits = vkt::layers::dense(flat, kClasses, vkt::layers::Activation::None, "out");
    const Tensor loss = vkt::sparse_softmax_cross_entropy(
        l.at("y"), logits, Tensor{},
        setup.sum ? vkt::Reduction::Sum : vkt::Reduction::SumByNonzeroWeights);
    vkt::TowerOptimizer opt([setup]() -> std::unique_ptr<vkt::Optimizer> {
      if (setup.adam) return std::make_unique<vkt::Adam>(0.05f);
      return std::make_unique<vkt::SGD>(0.1f);
    });
    std::optional<std::vector<Tensor>> vars;
    if (setup.embedding_only) vars = std::vector<Tensor>{table};
    return vkt::EstimatorSpec{.mode = mode, .loss = loss, .train_op = opt.minimize(loss, vars)};
  };
}

struct Batches {
  std::vector<HostBatch> features, labels;
};

/// Ids with repeats within and across every shard of 1, 2 and 4 towers.
Batches batches(int steps) {
  std::mt19937 rng(17);
  Batches b;
  for (int s = 0; s < steps; ++s) {
    std::vector<std::int32_t> ids(kBatch * kIds), y(kBatch);
    for (auto& id : ids) id = static_cast<std::int32_t>(rng() % 5);  // few distinct ids...
    ids[1] = ids[0];                                                 // ...a repeat in shard 0
    ids[3 * kIds - 1] = static_cast<std::int32_t>(5 + s % 7);        // ...rows 5-11 too
    for (auto& v : y) v = static_cast<std::int32_t>(rng() % kClasses);
    b.features.push_back({{"ids", HostTensor::ints({kBatch, kIds}, ids)}});
    b.labels.push_back({{"y", HostTensor::ints({kBatch}, y)}});
  }
  return b;
}

struct Trained {
  std::vector<float> table, kernel, bias;
  std::uint64_t step = 0;
};

Trained train(Setup setup, int towers, const Batches& data, std::vector<float>* initial = nullptr) {
  vkt::Instance instance;
  const auto replicated = vkt::replicate_model_fn(
      model(setup), {.loss_reduction = setup.sum ? vkt::LossReduction::Sum
                                                 : vkt::LossReduction::SumByNonzeroWeights,
                     .devices = std::vector<std::uint32_t>(static_cast<std::size_t>(towers), 0)});
  vkt::ModelContext root(instance, {{"ids", {{kBatch, kIds}, vkt::DType::I32}}},
                         {{"y", {{kBatch}, vkt::DType::I32}}}, {.seed = 3});
  root.set_device_pool(&vkt::test::tower_devices());
  vkt::EstimatorSpec spec = replicated(root, {}, {}, vkt::Mode::Train, {});
  if (initial) *initial = spec.run->variable("emb");
  Trained out;
  for (std::size_t s = 0; s < data.features.size(); ++s) {
    spec.run->train_step(data.features[s], data.labels[s]);
    CHECK(spec.run->global_step() == s + 1);
  }
  out.table = spec.run->variable("emb");
  out.kernel = spec.run->variable("out/kernel");
  out.bias = spec.run->variable("out/bias");
  out.step = spec.run->global_step();
  return out;
}

double relative_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max<double>(diff, std::abs(a[i] - b[i]));
    scale = std::max<double>(scale, std::abs(b[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

}  // namespace

TEST_CASE("an embedding model trained on N towers matches 1 tower, lazily", "[device-matrix]") {
  const Batches data = batches(10);
  for (const Setup setup :
       {Setup{.adam = true}, Setup{.adam = false, .sum = true}, Setup{.adam = true, .sum = true}}) {
    std::vector<float> initial;
    const Trained one = train(setup, 1, data, &initial);
    for (int n : {2, 4}) {
      INFO(n << " towers, " << (setup.adam ? "Adam" : "SGD") << (setup.sum ? ", Sum" : ""));
      const Trained many = train(setup, n, data);
      CHECK(many.step == 10);
      CHECK(relative_diff(many.table, one.table) <= 1e-5);
      CHECK(relative_diff(many.kernel, one.kernel) <= 1e-5);
      CHECK(relative_diff(many.bias, one.bias) <= 1e-5);
      // Rows no id named keep their initial values bit for bit; the others moved.
      for (std::int64_t r = 0; r < kRows; ++r) {
        const auto row = [&](const std::vector<float>& t) {
          return std::vector<float>(t.begin() + r * kDim, t.begin() + (r + 1) * kDim);
        };
        if (r >= kUsedRows) {
          CHECK(row(many.table) == row(initial));
        } else {
          CHECK(row(many.table) != row(initial));
        }
      }
    }
  }
}

TEST_CASE("the embedding alone trained with SGD on N towers is 1 tower's, bit for bit",
          "[device-matrix]") {
  // Every row's gradient depends on its own example only, and the master's lazy
  // update sees the rows in the order one tower would: the same bits.
  const Setup setup{.adam = false, .sum = true, .embedding_only = true};
  const Batches data = batches(10);
  const Trained one = train(setup, 1, data);
  for (int n : {2, 4}) {
    INFO(n << " towers");
    const Trained many = train(setup, n, data);
    CHECK(many.table == one.table);
    CHECK(many.kernel == one.kernel);  // untrained: the initial values everywhere
  }
}

TEST_CASE("sparse gradients on several towers need the shared parameter server",
          "[device-matrix]") {
  for (const auto mode : {vkt::VariableMode::Mirrored, vkt::VariableMode::RoundRobin}) {
    const std::string error = vkt::test::error_of([&] {
      vkt::Instance instance;
      const auto replicated =
          vkt::replicate_model_fn(model({}), {.devices = {0, 0}, .variable_mode = mode});
      vkt::ModelContext root(instance, {{"ids", {{kBatch, kIds}, vkt::DType::I32}}},
                             {{"y", {{kBatch}, vkt::DType::I32}}});
      root.set_device_pool(&vkt::test::tower_devices());
      replicated(root, {}, {}, vkt::Mode::Train, {});
    });
    CHECK_THAT(error, Contains("variable 'emb' has a sparse (embedding) gradient"));
    CHECK_THAT(error, Contains("need VariableMode::SharedLocalParameterServer"));
  }
}
