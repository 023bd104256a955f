// The Estimator's refusals: every mistake a user can make with it is one
// vkt::Error saying what to fix, before any state changes; global steps past
// the largest; a model_dir it cannot write to.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include <vktower/tower/estimator.h>
#include <vktower/tower/hooks.h>
#include <vktower/tower/replicate.h>

#include "../test_support.h"
#include "estimator_models.h"

using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;
using vkt::test::error_of;
using vkt::test::TempDir;

using namespace vkt::test::estimator;

TEST_CASE("Estimator errors say what to fix", "[estimator][errors]") {
  const vkt::Dataset data = make_data(10, 8);
  const vkt::ModelFn model = vkt::replicate_model_fn(mlp, {.devices = towers(2)});
  TempDir dir;
  vkt::Estimator estimator(model, quiet(dir.path), {{"lr", 0.01}});
  CHECK_THAT(
      error_of([&] { estimator.train(training_input(data, 4), {.steps = 1, .max_steps = 3}); }),
      Contains("not both"));
  CHECK_THAT(error_of([&] { estimator.evaluate(vkt::dataset_input(data, {.batch_size = 4})); }),
             Contains("no checkpoint") && Contains("train the model first"));
  CHECK_THAT(error_of([&] { estimator.predict(vkt::dataset_input(data, {.batch_size = 4})); }),
             Contains("no checkpoint"));
  // A batch of 5 does not divide among 2 towers: refused when the model is built.
  CHECK_THAT(error_of([&] { estimator.train(training_input(data, 5), {.steps = 1}); }),
             Contains("does not divide among 2 towers"));
  CHECK_THAT(error_of([&] { vkt::dataset_input(data, {.label_columns = {"label"}}); }),
             Contains("'label'") && Contains("x, y"));
  CHECK_THAT(error_of([&] { vkt::dataset_input(data, {.epochs = -1}); }), Contains("epochs"));
  TempDir other;
  CHECK_THAT(error_of([&] { vkt::Estimator unreplicated(mlp, quiet(other.path)); }),
             Contains("replicate_model_fn"));
  CHECK_THAT(error_of([&] { estimator.train(training_input(data, 4), {.steps = 0}); }),
             Contains("steps is 0"));
  CHECK_THAT(
      error_of([&] { estimator.train(training_input(data, 4), {.steps = 1, .hooks = {nullptr}}); }),
      Contains("hook 0") && Contains("null"));
  CHECK_THAT(error_of([&] { vkt::Estimator bad(model, quiet("/proc/vktower-model")); }),
             Contains("'/proc/vktower-model' cannot be created"));
  vkt::RunConfig none = quiet(other.path);
  none.keep_checkpoint_max = 0;
  CHECK_THAT(error_of([&] { vkt::Estimator bad(model, none); }), Contains("keep_checkpoint_max"));
  // 10 examples in batches of 4 without drop_remainder: the third batch is short.
  CHECK_THAT(error_of([&] { estimator.train(vkt::dataset_input(data, {.batch_size = 4})); }),
             Contains("batch 3 has 2 examples") && Contains("drop_remainder"));
  CHECK_FALSE(estimator.latest_checkpoint());  // nothing was trained or saved

  // Another model on a model_dir written by this one (at step 3: two steps ran before the
  // short batch): refused, naming the file.
  estimator.train(training_input(data, 4), {.steps = 1});
  vkt::Estimator other_model(vkt::replicate_model_fn(identity, {.devices = towers(2)}),
                             quiet(dir.path));
  const std::string mismatch =
      error_of([&] { other_model.train(training_input(data, 4), {.steps = 1}); });
  // One short line: the first difference and the fix (the rest at debug level).
  CHECK_THAT(mismatch, StartsWith("checkpoint '" + (dir / "ckpt-3.safetensors") +
                                  "' was written by another model (the model's 'w' is not in it") &&
                           EndsWith("give another RunConfig.model_dir, or build the model that "
                                    "wrote it"));
  CHECK(mismatch.size() < 200 + (dir / "ckpt-3.safetensors").size());
}

TEST_CASE("Estimator: steps that would pass the largest global step are refused, naming them",
          "[estimator][errors]") {
  const vkt::Dataset data = make_data(8, 12);
  TempDir dir;
  vkt::Estimator estimator(vkt::replicate_model_fn(identity, {.devices = towers(1)}),
                           quiet(dir.path));
  estimator.train(training_input(data, 4), {.steps = 2});
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  // 2 + kMax wraps to 1: "max_steps is 1: nothing to train", and success.
  const std::string message =
      error_of([&] { estimator.train(training_input(data, 4), {.steps = kMax}); });
  CHECK(message ==
        "train: steps 18446744073709551615 from global step 2 would pass the largest global step "
        "18446744073709551615; give 1 to 18446744073709551613 steps");
  CHECK_THAT(error_of([&] {
               estimator.train_and_evaluate(training_input(data, 4), {.steps = kMax - 1},
                                            vkt::dataset_input(data, {.batch_size = 4}), 4);
             }),
             Contains("steps 18446744073709551614 from global step 2 would pass"));
  CHECK(estimator.global_step() == 2);
}

TEST_CASE("Estimator: a model_dir it cannot write to is refused before the first step",
          "[estimator][errors]") {
  struct Steps : vkt::TrainingHook {
    int begun = 0, steps = 0;
    void begin() override { ++begun; }
    void after_step(std::uint64_t, float) override { ++steps; }
  };
  // An existing directory that takes no new file, even for root (tests run
  // as root, which ignores a read-only mode): procfs.
  const std::string dir = "/proc/self";
  vkt::Estimator estimator(vkt::replicate_model_fn(identity, {.devices = towers(1)}), quiet(dir));
  const auto steps = std::make_shared<Steps>();
  const std::string message = error_of([&] {
    estimator.train(training_input(make_data(8, 13), 4), {.steps = 2, .hooks = {steps}});
  });
  CHECK_THAT(message, Contains("RunConfig.model_dir '/proc/self' is not writable") &&
                          Contains("checkpoints cannot be saved there"));
  CHECK(steps->begun == 0);
  CHECK(steps->steps == 0);
}
