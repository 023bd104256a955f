// Unequal shards (ReplicateOptions::shard_weights): each tower's loss weighs
// its rows, so 3:1 (and 1:2:1) shards train, evaluate and predict as one tower
// on the whole batch does, for every loss reduction, dropout included (a row
// draws its mask by its place in the global batch).
#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <vktower/runtime/io/checkpoint.h>
#include <vktower/tower/estimator.h>
#include <vktower/tower/replicate.h>

#include "../dropout_mlp_fixture.h"
#include "../estimator_support.h"

using Catch::Matchers::Contains;
using vkt::test::TempDir;

namespace {

constexpr std::int64_t kRows = 48;

struct Result {
  std::vector<float> variables;
  std::map<std::string, double> metrics;
  std::vector<float> logits;
};

/// 5 steps on batches of 16, then evaluation and prediction in batches of 20
/// (the last one short: 8 real rows, padded).
Result run(vkt::Reduction reduction, vkt::LossReduction across, std::vector<double> weights) {
  const int towers = weights.empty() ? 1 : static_cast<int>(weights.size());
  TempDir dir;
  vkt::Estimator estimator(vkt::replicate_model_fn(vkt::test::dropout_mlp({.reduction = reduction}),
                                                   {.loss_reduction = across,
                                                    .devices = std::vector<std::uint32_t>(
                                                        static_cast<std::size_t>(towers), 0),
                                                    .shard_weights = std::move(weights)}),
                           vkt::test::quiet_config(dir.path, 4));
  const vkt::Dataset data = vkt::test::classification_data(kRows, 5, 3, 6);
  estimator.train(vkt::test::training_batches(data, 16), {.steps = 5});
  Result r;
  r.variables = vkt::test::variables_of(
      estimator, std::vector<const char*>{"hidden/kernel", "hidden/bias", "out/kernel"});
  r.metrics = estimator.evaluate(vkt::dataset_input(data, {.batch_size = 20}));
  r.logits = estimator.predict(vkt::dataset_input(data, {.batch_size = 20})).at("logits").f32;
  return r;
}

}  // namespace

TEST_CASE(
    "shards of 3:1 and 1:2:1 train, evaluate and predict as one tower on the whole batch, for "
    "every loss reduction",
    "[towers][unequal_shards]") {
  struct Case {
    vkt::Reduction reduction;
    vkt::LossReduction across;
  };
  for (const Case c :
       {Case{vkt::Reduction::Mean, vkt::LossReduction::Mean},
        Case{vkt::Reduction::SumByNonzeroWeights, vkt::LossReduction::SumByNonzeroWeights},
        Case{vkt::Reduction::Sum, vkt::LossReduction::Sum}}) {
    INFO("reduction " << static_cast<int>(c.reduction));
    const Result one = run(c.reduction, c.across, {});
    for (const std::vector<double>& weights :
         {std::vector<double>{3, 1}, std::vector<double>{1, 2, 1}}) {
      INFO(weights.size() << " towers");
      const Result many = run(c.reduction, c.across, weights);
      // Float reassociation of the towers' sum; a shard weighed by 1/N
      // instead of its rows moves the weights by ~1e-2.
      CHECK(vkt::test::worst_difference(many.variables, one.variables) < 2e-5f);
      CHECK(many.metrics.at("examples") == kRows);
      CHECK(std::abs(many.metrics.at("loss") - one.metrics.at("loss")) < 1e-5);
      CHECK(std::abs(many.metrics.at("accuracy") - one.metrics.at("accuracy")) < 1e-9);
      REQUIRE(many.logits.size() == one.logits.size());
      CHECK(vkt::test::worst_difference(many.logits, one.logits) < 1e-4f);
    }
  }
}

TEST_CASE("shard weights that are not one positive number per tower are refused",
          "[towers][unequal_shards][errors]") {
  const auto error = [](std::vector<double> weights) {
    return vkt::test::error_of(
        [&] { run(vkt::Reduction::Mean, vkt::LossReduction::Mean, std::move(weights)); });
  };
  CHECK_THAT(error({3, 0}), Contains("must each be a finite number above 0"));
  CHECK_THAT(error({1, -2}), Contains("must each be a finite number above 0"));
}

TEST_CASE(
    "measured shards: after the measured steps the towers share the batch by their speed, "
    "every later checkpoint records the weights, a resume keeps them, and training equals one "
    "tower",
    "[towers][unequal_shards][measured]") {
  const vkt::Dataset data = vkt::test::classification_data(kRows, 5, 3, 6);
  const auto estimator = [&](const TempDir& dir, std::vector<std::uint32_t> devices) {
    return std::make_unique<vkt::Estimator>(
        vkt::replicate_model_fn(vkt::test::dropout_mlp(), {.devices = std::move(devices),
                                                           .shard_split = vkt::ShardSplit::Measured,
                                                           .measure_steps = 2}),
        vkt::test::quiet_config(dir.path, 4, 1));
  };
  TempDir measured, alone;
  REQUIRE(estimator(measured, {0, 0})->train(vkt::test::training_batches(data, 16), {.steps = 6}) ==
          6);
  REQUIRE(estimator(alone, {0})->train(vkt::test::training_batches(data, 16), {.steps = 8}) == 8);
  // Step 1 builds pipelines; steps 2 and 3 are timed; from ckpt-3 on the
  // weights are recorded, the same ones in every checkpoint.
  CHECK(vkt::checkpoint_shard_weights(measured / "ckpt-2.safetensors").empty());
  const std::vector<double> weights =
      vkt::checkpoint_shard_weights(measured / "ckpt-3.safetensors");
  REQUIRE(weights.size() == 2);
  CHECK(weights[0] > 0);
  CHECK(weights[1] > 0);
  CHECK(vkt::checkpoint_shard_weights(measured / "ckpt-6.safetensors") == weights);
  // A new run on the same towers takes them from the checkpoint, not measuring anew.
  auto resumed = estimator(measured, {0, 0});
  REQUIRE(resumed->train(vkt::test::training_batches(data, 16), {.steps = 2}) == 8);
  CHECK(vkt::checkpoint_shard_weights(measured / "ckpt-8.safetensors") == weights);
  // However the batch was shared: float reassociation from one tower only.
  const std::vector<const char*> names{"hidden/kernel", "hidden/bias", "out/kernel"};
  vkt::Estimator one(vkt::replicate_model_fn(vkt::test::dropout_mlp(), {.devices = {0}}),
                     vkt::test::quiet_config(alone.path, 4));
  CHECK(vkt::test::worst_difference(vkt::test::variables_of(*resumed, names),
                                    vkt::test::variables_of(one, names)) < 2e-5f);
}
