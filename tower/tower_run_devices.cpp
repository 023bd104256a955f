// Where a TowerRun's work runs: the towers' Devices (TowerDevices, the
// pool) and every Device of the run.
#include "../runtime/vulkan/cache_dir.h"
#include "../runtime/vulkan/instance.h"
#include "tower_run.h"
#include "towers.h"
#include "weight_update.h"

#include <algorithm>

namespace vkt {

DeviceOptions TowerRun::device_options() const {
  if (options_.device_options) return *options_.device_options;
  // Towers are where users enter the library: here it reads their environment.
  DeviceOptions options = DeviceOptions::from_environment();
  options.cache_dir = default_cache_dir();
  return options;
}

Device& TowerRun::tower_device(const Instance& root, const std::vector<std::uint32_t>& devices,
                               int i) {
  const std::uint32_t index = devices[static_cast<std::size_t>(i)];
  bool shared = options_.tower_devices == TowerDevices::Shared;
  if (options_.tower_devices == TowerDevices::Auto) {
    shared = root.device(index).type != DeviceType::Cpu;
  }
  TowerDevicePool& pool = pool_ != nullptr ? *pool_ : own_pool_;
  return pool.device(root, devices, static_cast<std::size_t>(i), shared, device_options());
}

std::vector<const Device*> TowerRun::all_devices() const {
  std::vector<const Device*> all;
  const auto add = [&](const Device* d) {
    if (d != nullptr && std::find(all.begin(), all.end(), d) == all.end()) all.push_back(d);
  };
  for (const Towers::Tower& t : *towers_) add(t.device);
  if (update_) {
    for (const Device* d : update_->own_devices()) add(d);
  }
  return all;
}

}  // namespace vkt
