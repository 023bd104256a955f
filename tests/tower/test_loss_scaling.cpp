// Dynamic loss scaling on towers (ReplicateOptions::loss_scaling): exactly
// the unscaled run's bits while nothing overflows, a step with an inf or NaN
// on one tower skipped on every tower, and a resume across a skip.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>

#include <vktower/runtime/vulkan/instance.h>
#include <vktower/tower/estimator.h>
#include <vktower/tower/hooks.h>
#include <vktower/tower/replicate.h>
#include <vktower/tower/tower_run.h>

#include "../mlp_fixture.h"
#include "../test_support.h"
#include "../tower_devices.h"

using Catch::Matchers::Contains;
using vkt::HostBatch;
using vkt::LossScaling;
using vkt::VariableMode;

namespace {

constexpr std::int64_t kBatch = 12, kIn = 7;

/// `steps` batches; batch `poisoned` (if any) has a NaN in its last row,
/// which lies in the last tower's shard.
struct Batches : vkt::test::MlpBatches {
  explicit Batches(int steps, int poisoned = -1) : MlpBatches(steps, 11, kBatch, kIn) {
    if (poisoned >= 0) {
      xs.at(static_cast<std::size_t>(poisoned)).at("x").f32[kBatch * kIn - 1] =
          std::numeric_limits<float>::quiet_NaN();
    }
  }
  /// Every batch's rows in one table, features and "y", for a Dataset.
  HostBatch columns() const {
    HostBatch all = xs[0];
    vkt::HostTensor labels = ys[0].at("y");
    for (std::size_t s = 1; s < xs.size(); ++s) {
      all.at("x").append_rows(xs[s].at("x"));
      labels.append_rows(ys[s].at("y"));
    }
    all["y"] = labels;
    return all;
  }
};

/// adam_mlp replicated on `towers` towers of device 0, `accumulate`
/// micro-batches a step.
struct Training {
  Training(int towers, VariableMode mode, LossScaling scaling, std::uint32_t interval = 3,
           int accumulate = 1)
      : root(instance, {{"x", {{kBatch, kIn}}}}, {{"y", {{kBatch}, vkt::DType::I32}}},
             {.seed = 3}) {
    root.set_distribution({.accumulate_steps = accumulate});
    root.set_device_pool(&vkt::test::tower_devices());
    const auto replicated = vkt::replicate_model_fn(
        vkt::test::adam_mlp, {.devices = std::vector<std::uint32_t>(towers, 0),
                              .variable_mode = mode,
                              .loss_scaling = scaling,
                              .loss_scale = {.growth_interval = interval}});
    spec = replicated(root, {}, {}, vkt::Mode::Train, {});
  }
  void steps(const Batches& data, int from, int to) {
    for (int s = from; s < to; ++s) spec.run->train_step(data.xs[s], data.ys[s]);
  }
  /// The weights and Adam's slots, of the master and of every tower's graph.
  std::vector<std::vector<float>> state() {
    std::vector<std::vector<float>> out;
    for (const char* layer : {"hidden/kernel", "hidden/bias", "out/kernel", "out/bias"}) {
      for (const char* slot : {"", "/Adam/m", "/Adam/v"}) {
        out.push_back(spec.run->variable(std::string(layer) + slot));
      }
      for (int i = 0; i < spec.run->towers(); ++i) {
        vkt::Graph& g = spec.run->tower_graph(i);
        out.push_back(g.values(*g.find_variable(layer)));
      }
    }
    return out;
  }
  float scale() { return spec.run->variable("loss_scale/scale")[0]; }
  float good_steps() { return spec.run->variable("loss_scale/good_steps")[0]; }

  vkt::Instance instance;
  vkt::ModelContext root;
  vkt::EstimatorSpec spec;
};

}  // namespace

TEST_CASE(
    "towers under dynamic loss scaling give the unscaled run's bits, and the scale doubles "
    "every growth interval") {
  const Batches data(7);
  for (const int towers : {1, 2}) {
    for (const auto mode : {VariableMode::SharedLocalParameterServer, VariableMode::Mirrored}) {
      INFO(towers << " tower(s), variable mode " << static_cast<int>(mode));
      Training scaled(towers, mode, LossScaling::Dynamic), plain(towers, mode, LossScaling::Off);
      scaled.steps(data, 0, 7);
      plain.steps(data, 0, 7);
      // The scale is a power of two: the summed gradients are the unscaled
      // ones exactly scaled, and unscaling restores their bits.
      CHECK(scaled.state() == plain.state());
      CHECK(scaled.scale() == 65536.0f * 4);  // doubled after steps 3 and 6
      CHECK(scaled.good_steps() == 1.0f);
      CHECK(scaled.spec.run->loss() == plain.spec.run->loss());
    }
  }
}

TEST_CASE("accumulated micro-batches under dynamic loss scaling give the unscaled run's bits") {
  const Batches data(8);
  Training scaled(2, VariableMode::SharedLocalParameterServer, LossScaling::Dynamic, 3, 2);
  Training plain(2, VariableMode::SharedLocalParameterServer, LossScaling::Off, 3, 2);
  scaled.steps(data, 0, 8);
  plain.steps(data, 0, 8);
  CHECK(scaled.spec.run->global_step() == 4);
  CHECK(scaled.state() == plain.state());
  CHECK(scaled.scale() == 65536.0f * 2);  // 4 steps: doubled after the third
  CHECK(scaled.good_steps() == 1.0f);
}

TEST_CASE(
    "a NaN on one tower skips that step on every tower: weights and Adam's slots unchanged, "
    "the scale halved") {
  const Batches data(6, 3);
  for (const auto mode : {VariableMode::SharedLocalParameterServer, VariableMode::Mirrored}) {
    INFO("variable mode " << static_cast<int>(mode));
    Training run(2, mode, LossScaling::Dynamic, 2);
    run.steps(data, 0, 3);
    const auto before = run.state();
    CHECK(run.scale() == 65536.0f * 2);  // doubled after step 2
    run.steps(data, 3, 4);
    CHECK(std::isnan(run.spec.run->loss()));
    CHECK(run.state() == before);
    CHECK(run.scale() == 65536.0f);
    CHECK(run.good_steps() == 0.0f);
    // Training goes on from there.
    run.steps(data, 4, 6);
    CHECK(run.state() != before);
    CHECK(std::isfinite(run.spec.run->loss()));
    CHECK(run.scale() == 65536.0f * 2);
  }
}

TEST_CASE("a resume across a skipped step continues the scale and the weights exactly") {
  const Batches data(8, 2);
  vkt::test::TempDir dir;
  const std::string path = (dir.path / "ckpt.safetensors").string();
  Training straight(2, VariableMode::SharedLocalParameterServer, LossScaling::Dynamic, 2);
  straight.steps(data, 0, 4);
  straight.spec.run->save(path);
  straight.steps(data, 4, 8);
  Training resumed(2, VariableMode::SharedLocalParameterServer, LossScaling::Dynamic, 2);
  resumed.spec.run->restore(path);
  CHECK(resumed.scale() == 65536.0f);  // halved at step 2, not yet grown again
  CHECK(resumed.good_steps() == 1.0f);
  resumed.steps(data, 4, 8);
  CHECK(resumed.state() == straight.state());
  CHECK(resumed.scale() == straight.scale());
  CHECK(resumed.good_steps() == straight.good_steps());
}

TEST_CASE("dynamic loss scaling with round-robin variables, or a bad scale, is a clear error") {
  const std::string error =
      vkt::test::error_of([] { Training run(2, VariableMode::RoundRobin, LossScaling::Dynamic); });
  CHECK_THAT(error, Contains("RoundRobin") && Contains("--loss-scale off"));
  const std::string interval =
      vkt::test::error_of([] { Training run(1, VariableMode::Mirrored, LossScaling::Dynamic, 0); });
  CHECK_THAT(interval, Contains("growth interval is 0"));
}

TEST_CASE(
    "a checkpoint written without loss scaling resumes with it from the initial scale, and one "
    "written with it resumes without") {
  const Batches data(6);
  vkt::test::TempDir dir;
  const std::string plain_path = (dir.path / "plain.safetensors").string();
  const std::string scaled_path = (dir.path / "scaled.safetensors").string();
  Training plain(1, VariableMode::SharedLocalParameterServer, LossScaling::Off);
  plain.steps(data, 0, 3);
  plain.spec.run->save(plain_path);
  Training scaled(1, VariableMode::SharedLocalParameterServer, LossScaling::Dynamic);
  scaled.spec.run->restore(plain_path);
  CHECK(scaled.scale() == 65536.0f);
  CHECK(scaled.good_steps() == 0.0f);
  scaled.steps(data, 3, 5);
  CHECK(scaled.good_steps() == 2.0f);
  scaled.spec.run->save(scaled_path);
  Training again(1, VariableMode::SharedLocalParameterServer, LossScaling::Off);
  again.spec.run->restore(scaled_path);
  CHECK(again.spec.run->global_step() == 5);
  // Nothing overflowed: the scaled steps were the unscaled ones, bit for bit.
  plain.steps(data, 3, 5);
  CHECK(again.state() == plain.state());
}

TEST_CASE(
    "under loss scaling a NaN loss is a skipped step, not the end of training, up to a limit") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  vkt::NanLossHook strict;
  CHECK_THAT(vkt::test::error_of([&] { strict.after_step(3, nan); }), Contains("global step 3"));
  vkt::NanLossHook tolerant(2);
  tolerant.after_step(1, nan);
  tolerant.after_step(2, std::numeric_limits<float>::infinity());
  tolerant.after_step(3, 1.0f);  // a finite loss starts the count again
  tolerant.after_step(4, nan);
  tolerant.after_step(5, nan);
  CHECK_THAT(vkt::test::error_of([&] { tolerant.after_step(6, nan); }),
             Contains("global step 6") && Contains("3 steps in a row") && Contains("--precision"));

  // The Estimator goes on past step 3's NaN: that step was skipped.
  const HostBatch columns = Batches(5, 2).columns();
  vkt::test::TempDir dir;
  vkt::Estimator estimator(
      vkt::replicate_model_fn(vkt::test::adam_mlp,
                              {.devices = {0, 0}, .loss_scaling = LossScaling::Dynamic}),
      {.model_dir = dir.path.string(),
       .log_step_count_steps = 2,
       .save_summary_steps = 0,
       .progress = false,
       .plot_loss = false});
  estimator.train(vkt::dataset_input(vkt::Dataset(columns), {.batch_size = kBatch}), {.steps = 5});
  CHECK(estimator.variable_value("loss_scale/scale").f32 == std::vector<float>{32768.0f});
  CHECK(estimator.variable_value("loss_scale/skipped_steps").f32 == std::vector<float>{1.0f});
  // metrics.csv has the scale and the skips, once per step, ending with the run's.
  std::ifstream metrics(dir.path / "metrics.csv");
  std::vector<std::string> scale_steps;
  std::set<std::string> rows;
  for (std::string line; std::getline(metrics, line);) {
    if (line.find(",loss_scale,") != std::string::npos) {
      scale_steps.push_back(line.substr(0, line.find(',')));
    }
    rows.insert(line);
  }
  CHECK(scale_steps.size() == std::set<std::string>(scale_steps.begin(), scale_steps.end()).size());
  CHECK(scale_steps.size() >= 2);
  CHECK(rows.contains("5,train,loss_scale,32768"));
  CHECK(rows.contains("5,train,skipped_steps,1"));
  for (const float w : estimator.variable_value("hidden/kernel").f32) CHECK(std::isfinite(w));
}

TEST_CASE("the loss scale reaches metrics.csv with the losses, with no host wait of its own") {
  // Step 5 (batch 4) is skipped; the scale doubles after every 3 good steps.
  // Each row is the scale and the skips after its step.
  const std::map<int, std::pair<float, float>> after = {
      {1, {65536, 0}}, {2, {65536, 0}}, {3, {131072, 0}}, {4, {131072, 0}},
      {5, {65536, 1}}, {6, {65536, 1}}, {7, {65536, 1}},  {8, {131072, 1}}};
  const HostBatch columns = Batches(8, 4).columns();
  const auto mode = GENERATE(VariableMode::SharedLocalParameterServer, VariableMode::Mirrored);
  INFO("variable mode " << static_cast<int>(mode));
  // The Devices' host waits in training 8 steps, logging every `log_every`
  // steps (0: never), and metrics.csv's loss_scale and skipped_steps rows.
  const auto train = [&](std::uint64_t log_every, std::map<int, std::pair<float, float>>* rows) {
    const auto waits = [] {
      std::uint64_t n = 0;
      for (const vkt::Device* d : vkt::test::tower_devices().devices()) n += d->host_waits();
      return n;
    };
    vkt::test::TempDir dir;
    vkt::Estimator estimator(
        vkt::replicate_model_fn(vkt::test::adam_mlp, {.devices = {0, 0},
                                                      .variable_mode = mode,
                                                      .loss_scaling = LossScaling::Dynamic,
                                                      .loss_scale = {.growth_interval = 3}}),
        {.model_dir = dir.path.string(),
         .log_step_count_steps = log_every,
         .save_summary_steps = 0,
         .progress = false,
         .plot_loss = false,
         .device_pool = &vkt::test::tower_devices()});
    const std::uint64_t before = waits();
    estimator.train(vkt::dataset_input(vkt::Dataset(columns), {.batch_size = kBatch}),
                    {.steps = 8});
    const std::uint64_t used = waits() - before;
    std::ifstream metrics(dir.path / "metrics.csv");
    for (std::string line; rows && std::getline(metrics, line);) {
      char name[32] = {};
      int step = 0;
      float value = 0;
      if (std::sscanf(line.c_str(), "%d,train,%31[a-z_],%f", &step, name, &value) != 3) continue;
      if (std::string(name) == "loss_scale") (*rows)[step].first = value;
      if (std::string(name) == "skipped_steps") (*rows)[step].second = value;
    }
    return used;
  };
  // TowerRun reads the state with each step's loss, two steps late here.
  const Batches data(8, 4);
  Training run(2, mode, LossScaling::Dynamic, 3);
  CHECK_FALSE(run.spec.run->taken_loss_scale().has_value());
  for (int s = 0; s < 8; ++s) {
    run.steps(data, s, s + 1);
    for (const vkt::StepLoss& l : run.spec.run->take_losses(2)) {
      const std::optional<vkt::LossScaleState>& state = run.spec.run->taken_loss_scale();
      REQUIRE(state.has_value());
      CHECK(state->step == l.step);
      CHECK(std::pair(state->scale, state->skipped_steps) == after.at(static_cast<int>(l.step)));
    }
  }
  CHECK(run.spec.run->taken_loss_scale()->step == 6);

  train(0, nullptr);  // the kernels built, for both runs alike
  std::map<int, std::pair<float, float>> rows;
  const std::uint64_t logged = train(1, &rows), silent = train(0, nullptr);
  CHECK(logged == silent);
  REQUIRE(rows.size() >= 5);
  CHECK(rows.contains(8));
  for (const auto& [step, row] : rows) {
    INFO("step " << step);
    REQUIRE(after.contains(step));
    CHECK(row == after.at(step));
  }
}

TEST_CASE("a loss-scaled run is destroyed right after a step, its scale's copy still on its way") {
  const Batches data(1);
  for (const auto mode : {VariableMode::SharedLocalParameterServer, VariableMode::Mirrored}) {
    INFO("variable mode " << static_cast<int>(mode));
    for (int k = 0; k < 3; ++k) {
      Training run(2, mode, LossScaling::Dynamic);
      run.steps(data, 0, 1);  // then gone, nothing read: the copy must not outlive the scale
    }
  }
}
