// Towers on devices whose limits differ (forced on lavapipe through
// DeviceOptions: a larger buffer offset alignment, a smaller storage range)
// train together, and as one tower does on the global batch.
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include <vktower/runtime/vulkan/instance.h>
#include <vktower/tower/replicate.h>
#include <vktower/tower/tower_run.h>

#include "../mlp_fixture.h"
#include "../test_support.h"
#include "../tower_devices.h"

namespace {

constexpr std::int64_t kBatch = 12, kIn = 7;

/// The MLP's variables after `steps` steps on `devices` with per-tower options.
std::vector<std::vector<float>> train(const std::vector<vkt::DeviceOptions>& options,
                                      vkt::VariableMode mode, int steps) {
  vkt::Instance instance;
  const vkt::test::MlpBatches data(steps, 11, kBatch, kIn);
  vkt::ModelContext root(instance, {{"x", {{kBatch, kIn}}}}, {{"y", {{kBatch}, vkt::DType::I32}}});
  root.set_device_pool(&vkt::test::tower_devices());
  vkt::EstimatorSpec spec = vkt::replicate_model_fn(
      vkt::test::adam_mlp, {.devices = std::vector<std::uint32_t>(options.size(), 0),
                            .variable_mode = mode,
                            .tower_device_options = options})(root, {}, {}, vkt::Mode::Train, {});
  for (int s = 0; s < steps; ++s) spec.run->train_step(data.xs[s], data.ys[s]);
  std::vector<std::vector<float>> out;
  for (const char* name : {"hidden/kernel", "hidden/bias", "out/kernel", "out/bias"}) {
    out.push_back(spec.run->variable(name));
  }
  return out;
}

float worst(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  float w = 0;
  for (std::size_t v = 0; v < a.size(); ++v) {
    REQUIRE(a[v].size() == b[v].size());
    for (std::size_t i = 0; i < a[v].size(); ++i) w = std::max(w, std::abs(a[v][i] - b[v][i]));
  }
  return w;
}

}  // namespace

TEST_CASE(
    "towers on devices with other buffer alignments and storage ranges train together as one "
    "tower does, in every variable mode",
    "[towers][mixed_devices]") {
  const vkt::DeviceOptions plain = vkt::DeviceOptions::from_environment();
  vkt::DeviceOptions aligned = plain;
  aligned.min_buffer_offset_alignment = 256;
  vkt::DeviceOptions narrow = plain;
  narrow.min_buffer_offset_alignment = 64;
  narrow.max_storage_buffer_range = 1024;
  const auto one = train({plain}, vkt::VariableMode::SharedLocalParameterServer, 4);
  for (const vkt::VariableMode mode :
       {vkt::VariableMode::SharedLocalParameterServer, vkt::VariableMode::Mirrored,
        vkt::VariableMode::RoundRobin}) {
    INFO("variable mode " << static_cast<int>(mode));
    CHECK(worst(train({plain, aligned}, mode, 4), one) < 2e-5f);
    CHECK(worst(train({aligned, plain, narrow}, mode, 4), one) < 2e-5f);
  }
}
