// After the first step, training steps (with loss() and variable reads) and
// evaluation steps make nothing on any tower's Device: no memory, no command
// or descriptor pools. Run on the staged path (VKT_FORCE_STAGING=1, as on a
// discrete GPU) and on the mapped one, 1 and 2 towers, every variable mode.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <optional>
#include <random>
#include <string>

#include <vktower/optimizers/adam.h>
#include <vktower/optimizers/tower_optimizer.h>
#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/runtime/vulkan/instance.h>
#include <vktower/tower/metrics.h>
#include <vktower/tower/replicate.h>
#include <vktower/tower/tower_run.h>
#include "../env_scope.h"
#include "../mlp_fixture.h"
#include "../tower_devices.h"

using vkt::HostBatch;
using vkt::HostTensor;
using vkt::Tensor;

namespace {

constexpr std::int64_t kBatch = 8, kIn = 7;

using vkt::test::EnvScope;

struct Batch {
  HostBatch features, labels;
};

Batch make_batch(std::uint32_t seed) {
  std::mt19937 rng(seed);
  auto [features, labels] = vkt::test::random_mlp_batch(rng, kBatch, kIn);
  return {std::move(features), std::move(labels)};
}

std::shared_ptr<vkt::TowerRun> build(vkt::Instance& instance, int towers, vkt::VariableMode mode,
                                     vkt::Mode run_mode, int accumulate = 1) {
  const auto replicated = vkt::replicate_model_fn(
      vkt::test::adam_mlp,
      {.devices = std::vector<std::uint32_t>(static_cast<std::size_t>(towers), 0),
       .variable_mode = mode});
  vkt::ModelContext root(instance, {{"x", {{kBatch, kIn}}}}, {{"y", {{kBatch}, vkt::DType::I32}}},
                         {.seed = 2});
  root.set_device_pool(&vkt::test::tower_devices());
  root.set_distribution({.accumulate_steps = accumulate});
  return replicated(root, {}, {}, run_mode, {}).run;
}

/// Every tower device's counts, one line each, for an exact comparison.
std::string tower_counts(vkt::TowerRun& run) {
  std::string out;
  for (int i = 0; i < run.towers(); ++i) {
    out += "tower " + std::to_string(i) + ": " +
           to_string(run.tower_graph(i).device().object_counts()) + "\n";
  }
  return out;
}

void check_towers_use_path(vkt::TowerRun& run, bool staged) {
  for (int i = 0; i < run.towers(); ++i) {
    REQUIRE(run.tower_graph(i).device().options().force_staging == staged);
    // A discrete GPU never maps storage: there both cases take the staged path.
    if (staged) REQUIRE_FALSE(run.tower_graph(i).device().maps_storage());
  }
}

void check_steps_make_nothing(bool staged) {
  EnvScope force("VKT_FORCE_STAGING", staged ? "1" : "0");
  vkt::Instance instance;
  const Batch a = make_batch(1), b = make_batch(2);
  using VM = vkt::VariableMode;
  const std::pair<int, VM> configs[] = {{1, VM::SharedLocalParameterServer},
                                        {2, VM::SharedLocalParameterServer},
                                        {2, VM::Mirrored},
                                        {2, VM::RoundRobin}};
  for (const auto& [towers, mode] : configs) {
    INFO(towers << " towers, variable mode " << static_cast<int>(mode));
    const auto run = build(instance, towers, mode, vkt::Mode::Train);
    check_towers_use_path(*run, staged);
    // What a training loop reads between steps: the loss, and variables from
    // every tower's replica.
    const auto read_all = [&] {
      for (const char* name : {"hidden/kernel", "out/bias"}) {
        for (int i = 0; i < run->towers(); ++i) {
          vkt::Graph& g = run->tower_graph(i);
          REQUIRE_FALSE(g.values(*g.find_variable(name)).empty());
        }
      }
      return run->loss();
    };
    run->train_step(a.features, a.labels);
    const float first_loss = read_all();
    const std::string after_first = tower_counts(*run);
    float last_loss = first_loss;
    for (int s = 0; s < 4; ++s) {
      run->train_step(s % 2 ? a.features : b.features, s % 2 ? a.labels : b.labels);
      last_loss = read_all();
      INFO("train step " << s + 2);
      CHECK(tower_counts(*run) == after_first);
    }
    CHECK(run->global_step() == 5);
    CHECK(last_loss != first_loss);  // it trained: the reads are of new values
  }
  for (int towers : {1, 2}) {
    INFO(towers << " towers, evaluation");
    const auto run = build(instance, towers, VM::SharedLocalParameterServer, vkt::Mode::Eval);
    check_towers_use_path(*run, staged);
    run->evaluate_step(a.features, a.labels);
    const std::string after_first = tower_counts(*run);
    run->evaluate_step(b.features, b.labels, 5);  // tower 1 half padding
    run->evaluate_step(a.features, a.labels, 3);  // tower 1 padding only (skipped)
    const std::map<std::string, double> metrics = run->metrics();
    CHECK(tower_counts(*run) == after_first);
    CHECK(metrics.at("loss") > 0.0);
    run->reset_metrics();
    run->evaluate_step(b.features, b.labels);
    CHECK(tower_counts(*run) == after_first);
  }
}

}  // namespace

TEST_CASE("train and eval steps on 1 and 2 towers make nothing after the first, staged",
          "[tower-allocations]") {
  check_steps_make_nothing(true);
}

TEST_CASE("train and eval steps on 1 and 2 towers make nothing after the first, mapped",
          "[tower-allocations]") {
  check_steps_make_nothing(false);
}

TEST_CASE("training with accumulation makes nothing after the first step, 1 and 2 towers",
          "[tower-allocations]") {
  vkt::Instance instance;
  const Batch a = make_batch(1), b = make_batch(2);
  using VM = vkt::VariableMode;
  const std::pair<int, VM> configs[] = {{1, VM::SharedLocalParameterServer},
                                        {2, VM::SharedLocalParameterServer},
                                        {2, VM::Mirrored},
                                        {2, VM::RoundRobin}};
  for (const auto& [towers, mode] : configs) {
    INFO(towers << " towers, variable mode " << static_cast<int>(mode));
    const auto run = build(instance, towers, mode, vkt::Mode::Train, 3);
    // The first step's 3 micro-batches: a step's first and later micro-batches.
    for (int m = 0; m < 3; ++m) run->train_step(a.features, a.labels);
    REQUIRE(run->step_completed());
    const float first_loss = run->loss();
    const std::string after_first = tower_counts(*run);
    for (int m = 0; m < 9; ++m) {
      run->train_step(m % 2 ? a.features : b.features, m % 2 ? a.labels : b.labels);
      (void)run->loss();
      INFO("micro-batch " << m + 4);
      CHECK(tower_counts(*run) == after_first);
    }
    CHECK(run->global_step() == 4);
    CHECK(run->loss() != first_loss);
  }
}
