// What a new user meets first: unnamed layers, a key typo, an evaluation loss
// that needs no example_weights(), metrics.csv after a stopped run, a progress
// line that fits the terminal, and the temporary model directory of a run
// that was killed.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include <vktower/optimizers/sgd.h>
#include <vktower/optimizers/tower_optimizer.h>
#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/runtime/graph/ops/reduce.h>
#include <vktower/tower/estimator.h>
#include <vktower/tower/replicate.h>
#include <vktower/tower/training_log.h>

#include "../shared_device.h"
#include "../test_support.h"

using vkt::HostTensor;
using vkt::Tensor;
using vkt::test::TempDir;
namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kFeatures = 3;

/// `rows` examples: x in [-2, 2], y a class of 3.
vkt::Dataset three_classes(std::int64_t rows) {
  const std::vector<float> x =
      vkt::test::random_floats(static_cast<std::size_t>(rows * kFeatures), 21, -2.0f, 2.0f);
  std::vector<std::int32_t> y(static_cast<std::size_t>(rows));
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<std::int32_t>(i * 5 % 3);
  return vkt::Dataset(
      {{"x", HostTensor::floats({rows, kFeatures}, x)}, {"y", HostTensor::ints({rows}, y)}});
}

/// How the model's loss weighs the examples.
enum class Weights { Given, Left, OwnLoss };

/// logits = dense(x); the loss given ctx.example_weights(), given no weights,
/// or a mean of its own that knows nothing of padding.
vkt::ModelFn classifier(Weights weights) {
  return [weights](vkt::ModelContext& ctx, const vkt::TensorDict& f, const vkt::TensorDict& l,
                   vkt::Mode mode, const vkt::Params&) {
    const Tensor logits = vkt::layers::dense(f.at("x"), 3);
    vkt::EstimatorSpec spec{.mode = mode, .predictions = {{"logits", logits}}};
    if (mode == vkt::Mode::Predict) return spec;
    switch (weights) {
      case Weights::Given:
        spec.loss = vkt::sparse_softmax_cross_entropy(l.at("y"), logits, ctx.example_weights());
        break;
      case Weights::Left:
        spec.loss = vkt::sparse_softmax_cross_entropy(l.at("y"), logits);
        break;
      case Weights::OwnLoss:
        spec.loss = vkt::reduce_mean(
            vkt::sparse_softmax_cross_entropy(l.at("y"), logits, Tensor{}, vkt::Reduction::None));
        break;
    }
    if (mode == vkt::Mode::Train) {
      vkt::TowerOptimizer sgd(std::make_unique<vkt::SGD>(0.1f));
      spec.train_op = sgd.minimize(spec.loss);
    }
    return spec;
  };
}

vkt::RunConfig quiet(const std::string& dir) {
  return {.model_dir = dir,
          .random_seed = 3,
          .log_step_count_steps = 0,
          .save_summary_steps = 1,
          .progress = false,
          .plot_loss = false};
}

vkt::InputFn batches_of(const vkt::Dataset& data, std::int64_t batch, bool full) {
  // Training repeats the examples; evaluation reads them once.
  return vkt::dataset_input(data,
                            {.batch_size = batch, .epochs = full ? 0 : 1, .drop_remainder = full});
}

}  // namespace

TEST_CASE("unnamed layers take unique names, the same in every graph built by the same code",
          "[layers]") {
  const auto build = [](vkt::Graph& g) {
    const Tensor x = g.input("x", {4, 3});
    Tensor h = vkt::layers::dense(x, 5);
    h = vkt::layers::dense(h, 2, vkt::layers::Activation::None, "dense_2");  // named: taken
    h = vkt::layers::dense(h, 6);
    return vkt::layers::layer_norm(vkt::layers::dense(h, 7));
  };
  for (int graph = 0; graph < 2; ++graph) {
    vkt::Graph g(vkt::test::shared_device());
    build(g);
    INFO("graph " << graph);
    CHECK(g.find_variable("dense/kernel")->shape() == vkt::Shape{3, 5});
    CHECK(g.find_variable("dense_1/kernel")->shape() == vkt::Shape{2, 6});
    CHECK(g.find_variable("dense_2/kernel")->shape() == vkt::Shape{5, 2});
    CHECK(g.find_variable("dense_3/kernel")->shape() == vkt::Shape{6, 7});
    CHECK(g.find_variable("layer_norm/gamma")->shape() == vkt::Shape{7});
  }
}

TEST_CASE("a feature or label key the input does not give is an error naming the keys it gives",
          "[estimator][errors]") {
  const vkt::ModelFn typo = [](vkt::ModelContext&, const vkt::TensorDict& f,
                               const vkt::TensorDict& l, vkt::Mode mode, const vkt::Params&) {
    const Tensor logits = vkt::layers::dense(f.at("x"), 3);
    vkt::EstimatorSpec spec{.mode = mode};
    spec.loss = vkt::sparse_softmax_cross_entropy(l.at("label"), logits);
    return spec;
  };
  TempDir dir;
  vkt::Estimator estimator(vkt::replicate_model_fn(typo, {.devices = {0}}), quiet(dir.path));
  CHECK(vkt::test::error_of([&] { estimator.train(batches_of(three_classes(8), 4, true)); }) ==
        "the model asks its labels for 'label'; the input gives 'y': check the spelling of the "
        "key in the model and in the input");
}

TEST_CASE(
    "evaluation leaves the padding of a short last batch out of a loss given no weights, and "
    "refuses a loss of the model's own that would count it",
    "[estimator]") {
  // 11 examples in batches of 4 on 2 towers: the last batch has 3 real rows,
  // and tower 1's half of it is half padding.
  const vkt::Dataset data = three_classes(11);
  const auto evaluate = [&](Weights weights, std::int64_t batch) {
    TempDir dir;
    vkt::Estimator estimator(vkt::replicate_model_fn(classifier(weights), {.devices = {0, 0}}),
                             quiet(dir.path));
    estimator.train(batches_of(data, 4, true), {.steps = 2});
    return estimator.evaluate(batches_of(data, batch, false)).at("loss");
  };
  const double given = evaluate(Weights::Given, 4);
  CHECK(evaluate(Weights::Left, 4) == given);
  // The same model on batches of 2 (a tower holds 1 row: real or padding
  // only, never half): the mean over the same 11.
  CHECK(evaluate(Weights::Left, 2) == Approx(given).epsilon(1e-6));
  CHECK(evaluate(Weights::OwnLoss, 2) == Approx(given).epsilon(1e-6));
  CHECK(vkt::test::error_of([&] { evaluate(Weights::OwnLoss, 4); }) ==
        "evaluate: the last batch has 3 examples, padded to 4, and the model's loss does not "
        "weigh the padding out (vkt's losses do when given no weights; a loss of your own needs "
        "ModelContext::example_weights()); or evaluate a multiple of 4 examples");
}

TEST_CASE(
    "a run resumed from a checkpoint drops the metrics.csv rows its stopped run logged past it",
    "[estimator]") {
  TempDir dir;
  const vkt::Dataset data = three_classes(16);
  {
    vkt::Estimator estimator(vkt::replicate_model_fn(classifier(Weights::Given), {.devices = {0}}),
                             quiet(dir.path));
    estimator.train(batches_of(data, 4, true), {.steps = 3});
  }
  // What a run killed at step 6 left: rows past its last checkpoint (step 3).
  {
    std::ofstream metrics(dir / "metrics.csv", std::ios::app);
    for (int step = 4; step <= 6; ++step) metrics << step << ",train,loss,9\n";
    metrics << "5,eval,loss,9\n";
  }
  vkt::Estimator resumed(vkt::replicate_model_fn(classifier(Weights::Given), {.devices = {0}}),
                         quiet(dir.path));
  resumed.train(batches_of(data, 4, true), {.steps = 2});
  std::ifstream in(dir / "metrics.csv");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  INFO(fmt::format("{}", fmt::join(lines, "\n")));
  REQUIRE(lines.size() == 6);
  CHECK(lines[0] == "step,phase,name,value");
  for (int step = 1; step <= 5; ++step) {
    CHECK_THAT(lines[static_cast<std::size_t>(step)],
               Catch::Matchers::StartsWith(std::to_string(step) + ",train,loss,"));
  }
  CHECK(lines[4].find(",9") == std::string::npos);  // this run's loss, not the stopped run's
}

TEST_CASE("the progress line is never wider than the terminal, and its bar shrinks first",
          "[estimator]") {
  const std::uint64_t huge = 18446744073709551615ull;
  const std::vector<vkt::Progress> cases = {{.step = 178,
                                             .last_step = 1000,
                                             .fraction = 0.178,
                                             .loss = 0.5f,
                                             .examples_per_s = 51234,
                                             .eta_s = 12.4},
                                            {.step = huge - 1,
                                             .last_step = huge,
                                             .fraction = 1,
                                             .loss = -123456.789f,
                                             .examples_per_s = 1e12,
                                             .eta_s = 1e9},
                                            {.step = 5,
                                             .last_step = std::nullopt,
                                             .loss = 2,
                                             .examples_per_s = 10,
                                             .eta_s = std::nullopt}};
  for (const vkt::Progress& p : cases) {
    for (const int columns : {20, 40, 60, 80, 200}) {
      const std::string line = vkt::progress_line(p, columns);
      INFO(columns << " columns: '" << line << "'");
      CHECK(static_cast<int>(line.size()) <= columns - 1);
    }
  }
  CHECK(vkt::progress_line(cases[0], 200) ==
        "[#####.........................] step 178/1000 loss 0.5000 51234 examples/s ETA 0:12");
  CHECK(vkt::progress_line(cases[0], 60) ==
        "[.....] step 178/1000 loss 0.5000 51234 examples/s ETA 0:12");
  CHECK(vkt::progress_line(cases[0], 52) == "step 178/1000 loss 0.5000 51234 examples/s ETA 0:12");
  CHECK(vkt::progress_line(cases[0], 40) == "step 178/1000 loss 0.5000");
}

TEST_CASE("a killed run's temporary model directory is removed by the next run without one",
          "[estimator]") {
  // A process that has ended: its pid names no process (until the system reuses it).
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(::waitpid(child, nullptr, 0) == child);
  const fs::path stale = fs::temp_directory_path() / fmt::format("vktower-{}-0badf00d", child);
  const fs::path alive =
      fs::temp_directory_path() / fmt::format("vktower-{}-0badf00d", ::getppid());
  fs::create_directories(stale);
  fs::create_directories(alive);
  vkt::test::write_file(stale / "ckpt-5.safetensors", std::string("x"));
  {
    vkt::Estimator estimator(vkt::replicate_model_fn(classifier(Weights::Given), {.devices = {0}}),
                             quiet(""));
    CHECK_FALSE(fs::exists(stale));
    CHECK(fs::exists(alive));  // its maker still runs
  }
  fs::remove_all(alive);
}
