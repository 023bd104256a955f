// Exact resume with dropout: training is a pure function of the checkpoint and
// the global step, so N steps straight and N/2 + a new Estimator (a new process's
// worth: new instances, devices, executors) + N/2 write the same checkpoint
// bytes, on one tower and on two in every variable mode.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>

#include <vktower/optimizers/adam.h>
#include <vktower/optimizers/tower_optimizer.h>
#include <vktower/runtime/graph/ops/dropout.h>
#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/tower/estimator.h>
#include <vktower/tower/replicate.h>

#include "../dropout_mlp_fixture.h"
#include "../estimator_support.h"
#include "../test_support.h"
#include "../tower_devices.h"

using vkt::Tensor;
using vkt::test::TempDir;

namespace {

constexpr std::int64_t kFeatures = 6, kClasses = 3;

vkt::Dataset make_data(std::int64_t rows, std::uint32_t seed) {
  return vkt::test::classification_data(rows, kFeatures, kClasses, seed);
}

/// An MLP with two dropouts of `rate` (0.5: about half of each mask changes per step).
vkt::ModelFn dropout_mlp(float rate) {
  return [rate](vkt::ModelContext& ctx, const vkt::TensorDict& f, const vkt::TensorDict& l,
                vkt::Mode mode, const vkt::Params&) {
    using vkt::layers::Activation;
    Tensor h = vkt::layers::dense(f.at("x"), 16, Activation::Relu, "hidden1");
    h = vkt::dropout(h, rate, 1);
    h = vkt::layers::dense(h, 16, Activation::Relu, "hidden2");
    h = vkt::dropout(h, rate, 2);
    const Tensor logits = vkt::layers::dense(h, kClasses, Activation::None, "out");
    vkt::EstimatorSpec spec{.mode = mode};
    spec.predictions = {{"logits", logits}};
    if (mode == vkt::Mode::Predict) return spec;
    spec.loss = vkt::sparse_softmax_cross_entropy(l.at("y"), logits, ctx.example_weights(),
                                                  vkt::Reduction::Mean);
    if (mode == vkt::Mode::Train) {
      vkt::TowerOptimizer adam([] { return std::make_unique<vkt::Adam>(0.01f); });
      spec.train_op = adam.minimize(spec.loss);
    }
    return spec;
  };
}

vkt::RunConfig quiet(const std::string& dir) {
  return vkt::test::quiet_config(dir, 9);
}

vkt::InputFn training_input(const vkt::Dataset& data) {
  return vkt::dataset_input(
      data, {.batch_size = 8, .epochs = 0, .shuffle_seed = 3, .drop_remainder = true});
}

}  // namespace

TEST_CASE(
    "Estimator with dropout: N steps straight equal N/2, a new Estimator and N/2 more, bit for "
    "bit, on 1 tower and on 2 in every variable mode",
    "[estimator][resume][dropout]") {
  const vkt::Dataset data = make_data(40, 4);
  struct Case {
    int towers;
    vkt::VariableMode mode;
  };
  for (const Case c :
       {Case{1, vkt::VariableMode::SharedLocalParameterServer},
        Case{2, vkt::VariableMode::SharedLocalParameterServer},
        Case{2, vkt::VariableMode::Mirrored}, Case{2, vkt::VariableMode::RoundRobin}}) {
    INFO(c.towers << " tower(s), variable mode " << static_cast<int>(c.mode));
    const vkt::ModelFn model = vkt::replicate_model_fn(
        dropout_mlp(0.5f),
        {.devices = std::vector<std::uint32_t>(static_cast<std::size_t>(c.towers), 0),
         .variable_mode = c.mode});
    TempDir straight, resumed;
    {
      vkt::Estimator whole(model, quiet(straight.path));
      REQUIRE(whole.train(training_input(data), {.steps = 6}) == 6);
    }
    {
      vkt::Estimator first(model, quiet(resumed.path));
      REQUIRE(first.train(training_input(data), {.steps = 3}) == 3);
    }
    vkt::Estimator second(model, quiet(resumed.path));
    REQUIRE(second.train(training_input(data), {.steps = 3}) == 6);
    REQUIRE(second.resumed());
    const std::string a = vkt::test::read_file(straight / "ckpt-6.safetensors");
    REQUIRE(a.size() > 1000);
    // Booleans: Catch would print the files' bytes.
    const bool same = a == vkt::test::read_file(resumed / "ckpt-6.safetensors");
    CHECK(same);
    const bool trained = a != vkt::test::read_file(resumed / "ckpt-3.safetensors");
    CHECK(trained);
  }
}

TEST_CASE(
    "with dropout 0.3, 1, 2 and 4 towers train the same variables in every variable mode: an "
    "example draws its mask by its row of the global batch, not by its tower",
    "[estimator][dropout]") {
  const vkt::Dataset data = make_data(40, 4);
  const auto train = [&](int towers, vkt::VariableMode mode) {
    const vkt::ModelFn model = vkt::replicate_model_fn(
        dropout_mlp(0.3f),
        {.devices = std::vector<std::uint32_t>(static_cast<std::size_t>(towers), 0),
         .variable_mode = mode});
    TempDir dir;
    vkt::Estimator estimator(model, quiet(dir.path));
    REQUIRE(estimator.train(training_input(data), {.steps = 4}) == 4);
    return vkt::test::variables_of(
        estimator,
        std::vector<const char*>{"hidden1/kernel", "hidden2/kernel", "out/kernel", "out/bias"});
  };
  const std::vector<float> one = train(1, vkt::VariableMode::SharedLocalParameterServer);
  for (const vkt::VariableMode mode :
       {vkt::VariableMode::SharedLocalParameterServer, vkt::VariableMode::Mirrored,
        vkt::VariableMode::RoundRobin}) {
    for (const int towers : {2, 4}) {
      INFO(towers << " towers, variable mode " << static_cast<int>(mode));
      const std::vector<float> n = train(towers, mode);
      // The towers' gradients are summed in another order than one tower's
      // rows: float reassociation, ~1e-7 relative per step; a mask drawn by
      // tower moves a variable by ~1e-2 (Adam's steps of 0.01).
      const float worst = vkt::test::worst_difference(n, one);
      CHECK(worst < 2e-5f);
    }
  }
}
