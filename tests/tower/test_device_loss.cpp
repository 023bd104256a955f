// A tower's device lost mid-step (DeviceOptions::lose_device_at_submit makes
// its k-th submit fail as VK_ERROR_DEVICE_LOST would): the step is given up
// with nothing of it saved; RunConfig::on_device_loss = Stop ends train() with
// a vkt::DeviceLost naming the device and the intact last checkpoint, Continue
// restores that checkpoint and finishes on the remaining towers, as a run
// started from it on those towers does, bit for bit. Every submit of a step is
// tried: before, during and after the exchange and the weights' copy.
#include <catch2/catch.hpp>

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include <vktower/runtime/io/checkpoint.h>
#include <vktower/runtime/vulkan/error.h>
#include <vktower/tower/estimator.h>
#include <vktower/tower/replicate.h>

#include "../dropout_mlp_fixture.h"

using Catch::Matchers::Contains;
using vkt::test::TempDir;
namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t kSteps = 6;

struct Run {
  int towers = 2;
  vkt::VariableMode mode = vkt::VariableMode::SharedLocalParameterServer;
  int faulty = 1;        // the tower whose device fails
  std::uint64_t at = 0;  // its failing submit; 0: none
  vkt::DeviceLossAction on_loss = vkt::DeviceLossAction::Stop;
};

/// Trains `run` in `dir` to global step `to`, a checkpoint every 2 steps.
std::uint64_t train(const Run& run, const std::string& dir, std::uint64_t to = kSteps) {
  std::vector<vkt::DeviceOptions> per_tower(static_cast<std::size_t>(run.towers));
  if (run.at != 0) per_tower[static_cast<std::size_t>(run.faulty)].lose_device_at_submit = run.at;
  vkt::RunConfig config = vkt::test::quiet_config(dir, 3, 2);
  config.on_device_loss = run.on_loss;
  vkt::Estimator estimator(vkt::replicate_model_fn(vkt::test::dropout_mlp(),
                                                   {.devices = std::vector<std::uint32_t>(
                                                        static_cast<std::size_t>(run.towers), 0),
                                                    .variable_mode = run.mode,
                                                    .tower_device_options = per_tower}),
                           config);
  return estimator.train(
      vkt::test::training_batches(vkt::test::classification_data(48, 5, 3, 8), 12),
      {.max_steps = to});
}

/// Where train() stopped when tower `faulty` fails at submit `at`: the global
/// step it stopped after, and the last checkpoint's step (0: none).
struct Stop {
  std::uint64_t after = kSteps, checkpoint = kSteps;
};
Stop stop_of(const Run& base, std::uint64_t at) {
  Run run = base;
  run.at = at;
  TempDir dir;
  try {
    train(run, dir.path);
  } catch (const vkt::DeviceLost& e) {
    const std::string what = e.what();
    std::smatch after, saved;
    REQUIRE(
        std::regex_search(what, after, std::regex("training stopped after global step (\\d+)")));
    const bool any =
        std::regex_search(what, saved, std::regex("ckpt-(\\d+)\\.safetensors, is intact"));
    return {std::stoull(after[1].str()), any ? std::stoull(saved[1].str()) : 0};
  }
  return {};
}

/// The first submit of tower `faulty`'s device whose failure gives a Stop
/// that `reached` (a bisection: the steps only grow with the submit number).
template <typename Reached>
std::uint64_t first_submit(const Run& run, Reached reached) {
  std::uint64_t lo = 1, hi = 2;
  while (!reached(stop_of(run, hi))) hi *= 2;
  while (lo < hi) {
    const std::uint64_t mid = (lo + hi) / 2;
    if (reached(stop_of(run, mid)))
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

/// The submits of tower `faulty`'s device after ckpt-2 is saved and before
/// step 3 ends: from the first whose failure leaves ckpt-2 the last
/// checkpoint to the first that stops the run after step 3.
std::pair<std::uint64_t, std::uint64_t> third_step_submits(const Run& run) {
  return {first_submit(run, [](const Stop& s) { return s.checkpoint >= 2; }),
          first_submit(run, [](const Stop& s) { return s.after >= 3; })};
}

/// One submit of those, found with one bisection instead of two: the one
/// before the step's last, checked (or its last).
std::uint64_t a_third_step_submit(const Run& run) {
  const std::uint64_t end = first_submit(run, [](const Stop& s) { return s.after >= 3; });
  for (const std::uint64_t at : {end - 2, end - 1}) {
    const Stop stop = stop_of(run, at);
    if (stop.after == 2 && stop.checkpoint == 2) return at;
  }
  FAIL("no submit of step 3 after ckpt-2 found below " << end);
  return 0;
}

std::string read(const std::string& path) {
  return vkt::test::read_file(path);
}

}  // namespace

TEST_CASE(
    "a tower's device lost at any submit of a step: Stop names the device, the tower and the "
    "last checkpoint, which loads, and Continue finishes on the other tower as a run started from "
    "that checkpoint does",
    "[estimator][device_loss]") {
  const Run base{};
  const auto [begin, end] = third_step_submits(base);
  INFO("tower 1's submits in step 3: [" << begin << ", " << end << ")");
  REQUIRE(end > begin + 1);  // a step takes several submits on a tower

  // The run a Continue must equal: 2 towers to ckpt-2, then 1 tower.
  TempDir healthy, restarted;
  REQUIRE(train(base, healthy.path) == kSteps);
  REQUIRE(train(base, restarted.path, 2) == 2);
  REQUIRE(train({.towers = 1}, restarted.path) == kSteps);
  const std::string expected = read(restarted / "ckpt-6.safetensors");

  for (std::uint64_t at = begin; at < end; ++at) {
    INFO("tower 1 lost at its submit " << at);
    TempDir stopped;
    const std::string error = vkt::test::error_of([&] { train({.at = at}, stopped.path); });
    CHECK_THAT(error, Contains("device 0 (llvmpipe") && Contains("was lost") &&
                          Contains("tower 1 (device 0") &&
                          Contains("training stopped after global step 2") &&
                          Contains("ckpt-2.safetensors, is intact"));
    // Nothing of step 3 was saved; the checkpoint the error names loads.
    CHECK(!fs::exists(stopped / "ckpt-4.safetensors"));
    CHECK(vkt::checkpoint_global_step(stopped / "ckpt-2.safetensors") == 2);
    CHECK(read(stopped / "ckpt-2.safetensors") == read(healthy / "ckpt-2.safetensors"));
    TempDir continued;
    REQUIRE(train({.at = at, .on_loss = vkt::DeviceLossAction::Continue}, continued.path) ==
            kSteps);
    const bool same = read(continued / "ckpt-6.safetensors") == expected;
    CHECK(same);
  }
}

TEST_CASE(
    "Continue after the consolidation device's tower is lost, and in Mirrored mode, equals the "
    "run started from the last checkpoint on the remaining towers",
    "[estimator][device_loss]") {
  for (const Run base : {Run{.faulty = 0}, Run{.mode = vkt::VariableMode::Mirrored}}) {
    INFO(base.towers << " towers, tower " << base.faulty << " lost, variable mode "
                     << static_cast<int>(base.mode));
    TempDir restarted;
    REQUIRE(train(base, restarted.path, 2) == 2);
    REQUIRE(train({.towers = base.towers - 1, .mode = base.mode}, restarted.path) == kSteps);
    Run run = base;
    run.at = a_third_step_submit(base);
    INFO("lost at submit " << run.at);
    run.on_loss = vkt::DeviceLossAction::Continue;
    TempDir continued;
    REQUIRE(train(run, continued.path) == kSteps);
    const bool same =
        read(continued / "ckpt-6.safetensors") == read(restarted / "ckpt-6.safetensors");
    CHECK(same);
  }
}

TEST_CASE("a device lost with no tower left, or with Stop, is not retried",
          "[estimator][device_loss][errors]") {
  TempDir dir;
  // One tower: Continue has nothing to go on with.
  const std::string error = vkt::test::error_of([&] {
    train({.towers = 1, .faulty = 0, .at = 3, .on_loss = vkt::DeviceLossAction::Continue},
          dir.path);
  });
  CHECK_THAT(error, Contains("was lost") && Contains("no tower is left") &&
                        Contains("no checkpoint was saved yet"));
}
