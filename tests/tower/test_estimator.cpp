// The Estimator: exact resume across processes' worth of Estimators, every
// evaluated example counted once (padding masked) on towers that do not divide
// the last batch, predictions in input order, the hooks, the files it writes,
// and every error.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <sstream>

#include <vktower/optimizers/adam.h>
#include <vktower/optimizers/sgd.h>
#include <vktower/optimizers/tower_optimizer.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/runtime/graph/ops/softmax.h>
#include <vktower/tower/estimator.h>
#include <vktower/tower/hooks.h>
#include <vktower/tower/replicate.h>

#include "../log_capture.h"
#include "../test_support.h"
#include "estimator_models.h"

using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;
using vkt::HostTensor;
using vkt::Tensor;
using vkt::test::error_of;
using vkt::test::TempDir;
namespace fs = std::filesystem;

using namespace vkt::test::estimator;

TEST_CASE(
    "Estimator: 200 steps equal 100, a new Estimator on the model_dir, and 100 more, bit "
    "for bit",
    "[estimator][device-matrix]") {
  const vkt::Dataset data = make_data(36, 1);  // 36 / 8: epochs end mid-batch, reshuffled
  const vkt::ModelFn model = vkt::replicate_model_fn(mlp, {.devices = towers(2)});
  const vkt::Params params = {{"lr", 0.01}};
  TempDir straight, resumed;
  {
    vkt::Estimator estimator(model, quiet(straight.path), params);
    CHECK(estimator.train(training_input(data, 8), {.steps = 200}) == 200);
    CHECK_FALSE(estimator.resumed());
  }
  {
    vkt::RunConfig config = quiet(resumed.path);
    config.save_checkpoints_steps = 50;
    vkt::Estimator first(model, config, params);
    CHECK(first.train(training_input(data, 8), {.max_steps = 100}) == 100);
  }
  vkt::Estimator second(model, quiet(resumed.path), params);
  CHECK(second.train(training_input(data, 8), {.steps = 100}) == 200);
  CHECK(second.resumed());
  // Every variable, Adam slot and the step: the files are the same bytes.
  const std::string a = vkt::test::read_file(straight / "ckpt-200.safetensors");
  REQUIRE(a.size() > 1000);
  CHECK(a == vkt::test::read_file(resumed / "ckpt-200.safetensors"));
  // And training moved the weights (the comparison is not of two untouched models).
  CHECK(a != vkt::test::read_file(resumed / "ckpt-100.safetensors"));
  // The values as the Estimator reads them back from its newest checkpoint.
  const HostTensor kernel = second.variable_value("hidden/kernel");
  CHECK(kernel.shape == vkt::Shape({kFeatures, 8}));
  CHECK_THAT(error_of([&] { (void)second.variable_value("nope"); }),
             Contains("no variable 'nope'") && Contains("hidden/kernel"));
  // max_steps already reached: nothing runs, the step stays.
  CHECK(second.train(training_input(data, 8), {.max_steps = 150}) == 200);
}

TEST_CASE("Estimator: Mirrored and RoundRobin train, resume bit for bit and evaluate",
          "[estimator][device-matrix]") {
  const vkt::Dataset data = make_data(24, 2);
  for (const auto mode : {vkt::VariableMode::Mirrored, vkt::VariableMode::RoundRobin}) {
    INFO("variable mode " << static_cast<int>(mode));
    const vkt::ModelFn model =
        vkt::replicate_model_fn(mlp, {.devices = towers(2), .variable_mode = mode});
    TempDir straight, resumed;
    vkt::Estimator whole(model, quiet(straight.path), {{"lr", 0.01}});
    whole.train(training_input(data, 8), {.steps = 30});
    {
      vkt::Estimator first(model, quiet(resumed.path), {{"lr", 0.01}});
      first.train(training_input(data, 8), {.steps = 20});
    }
    vkt::Estimator second(model, quiet(resumed.path), {{"lr", 0.01}});
    CHECK(second.train(training_input(data, 8), {.steps = 10}) == 30);
    CHECK(vkt::test::read_file(straight / "ckpt-30.safetensors") ==
          vkt::test::read_file(resumed / "ckpt-30.safetensors"));
    const auto a = whole.evaluate(vkt::dataset_input(data, {.batch_size = 8}));
    const auto b = second.evaluate(vkt::dataset_input(data, {.batch_size = 8}));
    CHECK(a.at("examples") == 24);
    CHECK(a.at("loss") == b.at("loss"));
    CHECK(a.at("accuracy") == b.at("accuracy"));
  }
}

TEST_CASE(
    "Estimator: evaluate counts every example once on 3 towers when the last batch does "
    "not divide",
    "[estimator][device-matrix]") {
  // 20 examples in batches of 6: 6, 6, 6 and 2, the last padded to 6 with two
  // real rows on tower 0 and padding only on towers 1 and 2.
  const vkt::Dataset data = make_data(20, 3);
  TempDir dir;
  vkt::Estimator estimator(
      vkt::replicate_model_fn(identity,
                              {.loss_reduction = vkt::LossReduction::Mean, .devices = towers(3)}),
      quiet(dir.path));
  estimator.train(training_input(data, 6), {.steps = 1});
  const std::map<std::string, double> result =
      estimator.evaluate(vkt::dataset_input(data, {.batch_size = 6}));

  const HostTensor& x = data.columns().at("x");
  const HostTensor& y = data.columns().at("y");
  double correct = 0, loss = 0, logit_sum = 0;
  for (std::int64_t r = 0; r < data.size(); ++r) {
    const float* row = &x.f32[static_cast<std::size_t>(r * kFeatures)];
    int best = 0;
    double sum = 0;
    for (int c = 0; c < kFeatures; ++c) {
      if (row[c] > row[best]) best = c;
      sum += std::exp(static_cast<double>(row[c]));
      logit_sum += row[c];
    }
    correct += best == y.i32[static_cast<std::size_t>(r)] ? 1 : 0;
    loss += std::log(sum) - row[y.i32[static_cast<std::size_t>(r)]];
  }
  CHECK(result.at("examples") == 20);
  CHECK(result.at("global_step") == 1);
  CHECK(result.at("accuracy") == Approx(correct / 20).epsilon(1e-12));
  CHECK(result.at("mean_logit") == Approx(logit_sum / (20 * kFeatures)).epsilon(1e-5));
  CHECK(result.at("loss") == Approx(loss / 20).epsilon(1e-5));
  // A limit on the batches: the first two only.
  CHECK(estimator.evaluate(vkt::dataset_input(data, {.batch_size = 6}), 2).at("examples") == 12);
}

TEST_CASE("Estimator: predict gives one row per example in input order, the short batch included",
          "[estimator][device-matrix]") {
  const vkt::Dataset data = make_data(20, 4);
  TempDir dir;
  vkt::Estimator estimator(vkt::replicate_model_fn(identity, {.devices = towers(3)}),
                           quiet(dir.path));
  estimator.train(training_input(data, 6), {.steps = 1});
  const vkt::HostBatch out = estimator.predict(vkt::dataset_input(data, {.batch_size = 6}));
  REQUIRE(out.at("logits").shape == vkt::Shape({20, kFeatures}));
  CHECK(out.at("logits").f32 == data.columns().at("x").f32);  // logits = x exactly
  REQUIRE(out.at("class").shape == vkt::Shape({20}));
  for (std::int64_t r = 0; r < 20; ++r) {
    const float* row = &data.columns().at("x").f32[static_cast<std::size_t>(r * kFeatures)];
    const auto best = std::max_element(row, row + kFeatures) - row;
    CHECK(out.at("class").i32[static_cast<std::size_t>(r)] == best);
  }
}

TEST_CASE("Estimator: a NaN loss stops training with an error naming the step, and saves nothing",
          "[estimator][device-matrix]") {
  vkt::Dataset data = make_data(24, 5);
  vkt::HostBatch columns = data.columns();
  columns.at("x").f32[3 * 4 * kFeatures] = NAN;  // in the fourth batch of 4
  TempDir dir;
  vkt::RunConfig config = quiet(dir.path);
  config.save_checkpoints_steps = 2;
  // The identity model: NaN features reach the loss (a ReLU would turn them into 0).
  vkt::Estimator estimator(vkt::replicate_model_fn(identity, {.devices = towers(2)}), config);
  const std::string message = error_of([&] {
    estimator.train(vkt::dataset_input(vkt::Dataset(columns), {.batch_size = 4}), {.steps = 6});
  });
  CHECK_THAT(message, Contains("nan") && Contains("global step 4"));
  CHECK(estimator.latest_checkpoint() == dir / "ckpt-2.safetensors");
  CHECK_FALSE(fs::exists(dir / "ckpt-4.safetensors"));
}

TEST_CASE(
    "Estimator: hooks see every step, a stop-at-step hook ends training, checkpoints are "
    "kept as configured",
    "[estimator][device-matrix]") {
  struct Recorder : vkt::TrainingHook {
    std::vector<std::uint64_t> steps;
    int begun = 0, ended = 0;
    void begin() override { ++begun; }
    void after_step(std::uint64_t step, float loss) override {
      CHECK(std::isfinite(loss));
      steps.push_back(step);
    }
    void end() override { ++ended; }
  };
  auto recorder = std::make_shared<Recorder>();
  TempDir dir;
  vkt::RunConfig config = quiet(dir.path);
  config.save_checkpoints_steps = 2;
  config.keep_checkpoint_max = 2;
  vkt::Estimator estimator(vkt::replicate_model_fn(mlp, {.devices = towers(2)}), config,
                           {{"lr", 0.01}});
  const std::uint64_t step =
      estimator.train(training_input(make_data(16, 6), 4),
                      {.hooks = {recorder, std::make_shared<vkt::StopAtStepHook>(7)}});
  CHECK(step == 7);
  CHECK(recorder->steps == std::vector<std::uint64_t>{1, 2, 3, 4, 5, 6, 7});
  CHECK(recorder->begun == 1);
  CHECK(recorder->ended == 1);
  // Saved at 2, 4, 6 and the end (7); the newest two are kept.
  CHECK_FALSE(fs::exists(dir / "ckpt-4.safetensors"));
  CHECK(fs::exists(dir / "ckpt-6.safetensors"));
  CHECK(estimator.latest_checkpoint() == dir / "ckpt-7.safetensors");
  // With neither steps nor max_steps, a finite input trains to its end: 16 / 4.
  TempDir other;
  vkt::Estimator once(vkt::replicate_model_fn(mlp, {.devices = towers(1)}), quiet(other.path),
                      {{"lr", 0.01}});
  CHECK(once.train(
            vkt::dataset_input(make_data(16, 6), {.batch_size = 4, .drop_remainder = true})) == 4);
}

TEST_CASE(
    "Estimator: hooks that take late losses see every step's loss, in order, as a hook that "
    "takes them at once does, and a late stop ends training after the queued steps",
    "[estimator]") {
  struct Recorder : vkt::TrainingHook {
    explicit Recorder(bool late, std::uint64_t stop_at = 0) : late(late), stop_at(stop_at) {}
    bool late;
    std::uint64_t stop_at;
    std::vector<std::pair<std::uint64_t, float>> seen;
    void after_step(std::uint64_t step, float loss) override { seen.emplace_back(step, loss); }
    bool should_stop() const override {
      return stop_at > 0 && !seen.empty() && seen.back().first >= stop_at;
    }
    bool takes_late_losses() const override { return late; }
  };
  const auto train = [](const std::shared_ptr<Recorder>& hook, int save_every) {
    TempDir dir;
    vkt::RunConfig config = quiet(dir.path);
    config.save_checkpoints_steps = save_every;
    vkt::Estimator estimator(vkt::replicate_model_fn(mlp, {.devices = towers(2)}), config,
                             {{"lr", 0.01}});
    return estimator.train(training_input(make_data(16, 6), 4), {.max_steps = 9, .hooks = {hook}});
  };
  const auto at_once = std::make_shared<Recorder>(false);
  CHECK(train(at_once, 0) == 9);
  REQUIRE(at_once->seen.size() == 9);
  for (const int save_every : {0, 4}) {  // losses handed over before each checkpoint too
    const auto late = std::make_shared<Recorder>(true);
    CHECK(train(late, save_every) == 9);
    CHECK(late->seen == at_once->seen);  // bit for bit
  }
  // Asked to stop at step 3: at once, training ends there; late, after the
  // (at most two) steps already queued, every loss still seen.
  const auto stops = std::make_shared<Recorder>(false, 3);
  CHECK(train(stops, 0) == 3);
  const auto stops_late = std::make_shared<Recorder>(true, 3);
  const std::uint64_t reached = train(stops_late, 0);
  CHECK(reached >= 3);
  CHECK(reached <= 5);
  CHECK(stops_late->seen.size() == reached);
  CHECK(stops_late->seen.back().first == reached);
}

TEST_CASE(
    "Estimator: metrics.csv holds the logged training rows and the evaluation, loss.png is "
    "drawn when gnuplot is installed",
    "[estimator][device-matrix]") {
  const vkt::Dataset data = make_data(16, 7);
  TempDir dir;
  vkt::RunConfig config = quiet(dir.path);
  config.log_step_count_steps = 2;
  config.save_summary_steps = 2;
  config.plot_loss = true;
  vkt::Estimator estimator(vkt::replicate_model_fn(mlp, {.devices = towers(2)}), config,
                           {{"lr", 0.01}});
  estimator.train(training_input(data, 4), {.steps = 5});
  estimator.evaluate(vkt::dataset_input(data, {.batch_size = 4}));
  std::ifstream in(dir / "metrics.csv");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  // Steps 2 and 4: the logging hook's rates, then the summary's loss; step 5,
  // the last: its loss; then the evaluation.
  REQUIRE(lines.size() == 1 + 3 * 2 + 1 + 3);
  CHECK(lines[0] == "step,phase,name,value");
  CHECK_THAT(lines[1], Catch::Matchers::StartsWith("2,train,examples_per_s,"));
  CHECK_THAT(lines[2], Catch::Matchers::StartsWith("2,train,steps_per_s,"));
  CHECK_THAT(lines[3], Catch::Matchers::StartsWith("2,train,loss,"));
  CHECK_THAT(lines[6], Catch::Matchers::StartsWith("4,train,loss,"));
  CHECK_THAT(lines[7], Catch::Matchers::StartsWith("5,train,loss,"));
  CHECK_THAT(lines[8], Catch::Matchers::StartsWith("5,eval,accuracy,"));
  CHECK_THAT(lines[9], Catch::Matchers::StartsWith("5,eval,examples,16"));
  CHECK_THAT(lines[10], Catch::Matchers::StartsWith("5,eval,loss,"));
  if (std::system("command -v gnuplot > /dev/null") == 0) {
    const std::string png = vkt::test::read_file(dir / "loss.png");
    REQUIRE(png.size() > 1000);
    CHECK(png.substr(1, 3) == "PNG");
  }
  // plot_loss off: the same files but the picture.
  TempDir unplotted;
  vkt::RunConfig no_plot = quiet(unplotted.path);
  vkt::Estimator plain(vkt::replicate_model_fn(mlp, {.devices = towers(2)}), no_plot,
                       {{"lr", 0.01}});
  plain.train(training_input(data, 4), {.steps = 2});
  plain.evaluate(vkt::dataset_input(data, {.batch_size = 4}));
  CHECK(fs::exists(unplotted / "metrics.csv"));
  CHECK_FALSE(fs::exists(unplotted / "loss.png"));
}

TEST_CASE("Estimator: train_and_evaluate evaluates every N steps and at the end",
          "[estimator][device-matrix]") {
  const vkt::Dataset data = make_data(16, 9);
  TempDir dir;
  vkt::Estimator estimator(vkt::replicate_model_fn(mlp, {.devices = towers(2)}), quiet(dir.path),
                           {{"lr", 0.01}});
  const std::map<std::string, double> last = estimator.train_and_evaluate(
      training_input(data, 4), {.max_steps = 10}, vkt::dataset_input(data, {.batch_size = 4}), 4);
  CHECK(last.at("global_step") == 10);
  CHECK(estimator.global_step() == 10);
  std::ifstream in(dir / "metrics.csv");
  std::vector<std::string> evaluated;
  for (std::string line; std::getline(in, line);) {
    if (line.find(",eval,examples,") != std::string::npos) evaluated.push_back(line);
  }
  CHECK(evaluated == std::vector<std::string>{"4,eval,examples,16", "8,eval,examples,16",
                                              "10,eval,examples,16"});
  CHECK_THAT(error_of([&] {
               estimator.train_and_evaluate(training_input(data, 4), {},
                                            vkt::dataset_input(data, {.batch_size = 4}), 4);
             }),
             Contains("give the training steps or max_steps"));
}

TEST_CASE("Estimator: train removes the temporary files that killed saves left, and says so",
          "[estimator]") {
  const vkt::Dataset data = make_data(16, 9);
  TempDir dir;
  {
    vkt::Estimator first(vkt::replicate_model_fn(mlp, {.devices = towers(1)}), quiet(dir.path));
    first.train(training_input(data, 4), {.steps = 2});
  }
  // A job killed while saving step 4, then restarted.
  vkt::test::write_file(dir / "ckpt-4.safetensors.tmp.Ab3dEf", std::string(3000, 'x'));
  vkt::test::write_file(dir / "checkpoint.tmp.Xy9z01", std::string("{\"l"));
  vkt::test::write_file(dir / "notes.tmp.Ab3dEf", std::string("the user's"));
  const vkt::test::LogCapture log;
  vkt::Estimator again(vkt::replicate_model_fn(mlp, {.devices = towers(1)}), quiet(dir.path));
  again.train(training_input(data, 4), {.steps = 2});
  CHECK(log.said("removed 2 temporary file(s) (0.0 MiB) that interrupted saves left in"));
  CHECK_FALSE(fs::exists(dir / "ckpt-4.safetensors.tmp.Ab3dEf"));
  CHECK_FALSE(fs::exists(dir / "checkpoint.tmp.Xy9z01"));
  CHECK(fs::exists(dir / "notes.tmp.Ab3dEf"));
  CHECK(fs::exists(dir / "ckpt-4.safetensors"));
  CHECK(again.global_step() == 4);
}

TEST_CASE("Estimator: a failed final save still ends metrics.csv at the last step", "[estimator]") {
  const vkt::Dataset data = make_data(16, 9);
  TempDir dir;
  fs::create_directory(dir / "ckpt-3.safetensors");  // the final checkpoint cannot take its name
  vkt::Estimator estimator(vkt::replicate_model_fn(mlp, {.devices = towers(1)}), quiet(dir.path));
  CHECK_THAT(error_of([&] { estimator.train(training_input(data, 4), {.steps = 3}); }),
             Contains("training stopped at global step 3, its checkpoint could not be saved") &&
                 Contains("no checkpoint was saved before"));
  std::ifstream in(dir / "metrics.csv");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  REQUIRE(lines.size() == 2);
  CHECK_THAT(lines[1], StartsWith("3,train,loss,"));
}

TEST_CASE("Estimator: without a model_dir it trains in a temporary directory, removed with it",
          "[estimator][device-matrix]") {
  std::string dir;
  {
    vkt::RunConfig config = quiet("");
    vkt::Estimator estimator(vkt::replicate_model_fn(identity, {.devices = towers(1)}), config);
    dir = estimator.config().model_dir;
    REQUIRE_FALSE(dir.empty());
    estimator.train(training_input(make_data(8, 10), 4), {.steps = 2});
    CHECK(fs::exists(fs::path(dir) / "ckpt-2.safetensors"));
    CHECK(estimator.variable_value("w").f32 == std::vector<float>{1, 1, 1});  // SGD rate 0
  }
  CHECK_FALSE(fs::exists(dir));
}
