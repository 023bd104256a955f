// The Estimator with gradient accumulation (RunConfig::accumulate_steps): each
// input batch is a micro-batch; steps, hooks, metrics.csv and checkpoints count
// global steps; a resumed run reads the batches an uninterrupted one would.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <vktower/runtime/io/checkpoint.h>
#include <vktower/runtime/vulkan/error.h>
#include <vktower/tower/estimator.h>
#include <vktower/tower/replicate.h>

#include "../dropout_mlp_fixture.h"
#include "../test_support.h"
#include "../tower_devices.h"

using Catch::Matchers::Contains;
using vkt::test::TempDir;

namespace {

constexpr std::int64_t kFeatures = 6, kClasses = 3;

vkt::Dataset make_data(std::int64_t rows, std::uint32_t seed) {
  return vkt::test::classification_data(rows, kFeatures, kClasses, seed);
}

/// The shared MLP (16 hidden units, Adam at 0.01), with a dropout of 0.5 when
/// `dropout`.
vkt::ModelFn mlp(bool dropout) {
  return vkt::test::dropout_mlp({.hidden = 16,
                                 .classes = kClasses,
                                 .dropout = dropout ? 0.5f : 0.0f,
                                 .learning_rate = 0.01f});
}

vkt::RunConfig quiet(const std::string& dir, int accumulate) {
  vkt::RunConfig config = vkt::test::quiet_config(dir, 9);
  config.accumulate_steps = accumulate;
  return config;
}

vkt::InputFn training_input(const vkt::Dataset& data, std::int64_t batch, int epochs = 0) {
  return vkt::dataset_input(
      data, {.batch_size = batch, .epochs = epochs, .shuffle_seed = 3, .drop_remainder = true});
}

/// Records the global steps after_step is called with.
struct StepsSeen : vkt::TrainingHook {
  std::vector<std::uint64_t> steps;
  void after_step(std::uint64_t global_step, float) override { steps.push_back(global_step); }
};

/// The steps of metrics.csv's training-loss rows.
std::vector<std::uint64_t> loss_rows(const std::filesystem::path& dir) {
  std::ifstream in(dir / "metrics.csv");
  std::vector<std::uint64_t> steps;
  for (std::string line; std::getline(in, line);) {
    if (line.find(",train,loss,") != std::string::npos) {
      steps.push_back(std::stoull(line.substr(0, line.find(','))));
    }
  }
  return steps;
}

std::vector<float> values(const std::filesystem::path& checkpoint, const std::string& name) {
  return vkt::read_checkpoint(checkpoint.string()).at(name).f32;
}

}  // namespace

TEST_CASE(
    "Estimator with accumulation and dropout: N steps straight equal N/2, a new Estimator and N/2 "
    "more, bit for bit, on 1 tower and on 2 in every variable mode",
    "[estimator][resume][accumulation]") {
  const vkt::Dataset data = make_data(48, 4);
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
        mlp(true), {.devices = std::vector<std::uint32_t>(static_cast<std::size_t>(c.towers), 0),
                    .variable_mode = c.mode});
    TempDir straight, resumed;
    {
      vkt::Estimator whole(model, quiet(straight.path, 3));
      REQUIRE(whole.train(training_input(data, 8), {.steps = 4}) == 4);
    }
    {
      vkt::RunConfig config = quiet(resumed.path, 3);
      config.save_checkpoints_steps = 1;
      config.save_summary_steps = 1;
      config.keep_checkpoint_max = 10;
      vkt::Estimator first(model, config);
      const auto seen = std::make_shared<StepsSeen>();
      REQUIRE(first.train(training_input(data, 8), {.steps = 2, .hooks = {seen}}) == 2);
      // Hooks, metrics.csv and checkpoints see global steps only.
      CHECK(seen->steps == std::vector<std::uint64_t>{1, 2});
      CHECK(loss_rows(resumed.path) == std::vector<std::uint64_t>{1, 2});
      CHECK(std::filesystem::exists(resumed / "ckpt-1.safetensors"));
      CHECK(std::filesystem::exists(resumed / "ckpt-2.safetensors"));
      CHECK_FALSE(std::filesystem::exists(resumed / "ckpt-3.safetensors"));
    }
    vkt::Estimator second(model, quiet(resumed.path, 3));
    REQUIRE(second.train(training_input(data, 8), {.steps = 2}) == 4);
    REQUIRE(second.resumed());
    const std::string a = vkt::test::read_file(straight / "ckpt-4.safetensors");
    REQUIRE(a.size() > 1000);
    const bool same =
        a == vkt::test::read_file(resumed / "ckpt-4.safetensors");  // not Catch's bytes
    CHECK(same);
    const bool trained = a != vkt::test::read_file(resumed / "ckpt-2.safetensors");
    CHECK(trained);
  }
}

TEST_CASE("Estimator: 2 micro-batches of 8 per step train what batches of 16 do, resumed part-way",
          "[estimator][accumulation]") {
  // Rows a multiple of 16: each epoch's shuffled batches of 16 are its batches
  // of 8 two by two.
  const vkt::Dataset data = make_data(32, 6);
  const vkt::ModelFn model = vkt::replicate_model_fn(mlp(false), {.devices = {0, 0}});
  TempDir big, micro;
  {
    vkt::Estimator plain(model, quiet(big.path, 1));
    REQUIRE(plain.train(training_input(data, 16), {.max_steps = 5}) == 5);
  }
  {
    vkt::Estimator accumulating(model, quiet(micro.path, 2));
    REQUIRE(accumulating.train(training_input(data, 8), {.max_steps = 3}) == 3);
  }
  vkt::Estimator accumulating(model, quiet(micro.path, 2));
  REQUIRE(accumulating.train(training_input(data, 8), {.max_steps = 5}) == 5);
  for (const char* name : {"hidden/kernel", "out/bias", "out/kernel/Adam/v"}) {
    INFO(name);
    const std::vector<float> want = values(big / "ckpt-5.safetensors", name);
    const std::vector<float> got = values(micro / "ckpt-5.safetensors", name);
    REQUIRE(want.size() == got.size());
    double diff = 0, norm = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
      norm += static_cast<double>(want[i]) * want[i];
    }
    CHECK(diff <= 1e-12 * norm);  // 1e-6 relative, norm-wise
  }
}

TEST_CASE("Estimator: an input that ends part-way through a step drops its micro-batches",
          "[estimator][accumulation]") {
  // 5 batches of 8, 2 per step: 2 steps, the fifth batch dropped, nothing saved mid-step.
  const vkt::Dataset data = make_data(40, 2);
  TempDir dir;
  vkt::Estimator estimator(vkt::replicate_model_fn(mlp(false), {.devices = {0}}),
                           quiet(dir.path, 2));
  CHECK(estimator.train(training_input(data, 8, 1)) == 2);
  CHECK(estimator.global_step() == 2);
  CHECK(estimator.latest_checkpoint().value_or("").find("ckpt-2.") != std::string::npos);
}

TEST_CASE("RunConfig.accumulate_steps below 1 is refused", "[estimator][accumulation]") {
  const vkt::ModelFn model = vkt::replicate_model_fn(mlp(false), {.devices = {0}});
  TempDir dir;
  CHECK_THROWS_WITH(vkt::Estimator(model, quiet(dir.path, 0)),
                    Contains("RunConfig.accumulate_steps is 0") && Contains("give 1 or more"));
}
