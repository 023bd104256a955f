#pragma once
// The TowerDevicePool of the running test case. A test case builds many
// models (1 tower against N, straight against resumed, every variable mode
// and precision); taking their Devices here, each kernel is built once per
// Device in the test case instead of once per model (on lavapipe, building
// kernels is most of a short test's time). Test cases stay apart: the
// listener in test_main.cpp drops the pool when each one ends.

#include <cstdint>
#include <memory>
#include <string>

#include <vktower/tower/estimator.h>
#include <vktower/tower/tower_device_pool.h>

namespace vkt::test {

inline std::unique_ptr<TowerDevicePool>& tower_devices_slot() {
  static std::unique_ptr<TowerDevicePool> slot;
  return slot;
}

/// The running test case's pool (made on first use): for ModelContext's
/// set_device_pool and RunConfig::device_pool.
inline TowerDevicePool& tower_devices() {
  std::unique_ptr<TowerDevicePool>& slot = tower_devices_slot();
  if (!slot) slot = std::make_unique<TowerDevicePool>();
  return *slot;
}

/// Drops the pool and its Devices; every model using them must be gone.
inline void release_tower_devices() {
  tower_devices_slot().reset();
}

/// A RunConfig for tests on the test case's Devices: `dir`, `seed`, a checkpoint every `save_every`
/// steps (0: at the end), no logging, no progress, no plot.
inline RunConfig quiet_config(const std::string& dir, std::uint64_t seed,
                              std::uint64_t save_every = 0) {
  return {.model_dir = dir,
          .random_seed = seed,
          .save_checkpoints_steps = save_every,
          .log_step_count_steps = 0,
          .save_summary_steps = 0,
          .progress = false,
          .plot_loss = false,
          .device_pool = &tower_devices()};
}

}  // namespace vkt::test
