// Where a TowerRun's work runs: the towers' Devices (TowerDevices, the
// pool), the consolidation device, and every Device of the run.
#include "../runtime/vulkan/cache_dir.h"
#include "../runtime/vulkan/instance.h"
#include "tower_run.h"

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
  for (const Tower& t : towers_) add(t.device);
  add(master_device_.get());
  for (const Share& share : shares_) add(share.device.get());
  return all;
}

bool TowerRun::on_tower_device() const {
  return options_.consolidation_placement != ConsolidationPlacement::SeparateDevice;
}

Device& TowerRun::consolidation_device(const Instance& root, std::uint32_t index,
                                       std::unique_ptr<Instance>& instance,
                                       std::unique_ptr<Device>& device, const Tower* tower) {
  if (on_tower_device()) {
    if (tower != nullptr) return *tower->device;
    for (Tower& t : towers_) {
      if (t.device->info().index == index) return *t.device;
    }
  }
  instance = TowerDevicePool::own_instance(root, index);
  device = std::make_unique<Device>(*instance, index, device_options());
  return *device;
}

}  // namespace vkt
