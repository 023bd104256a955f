// Where a TowerRun's work runs: the towers' Devices (TowerDevices, the
// pool) and every Device of the run.
#include "../runtime/vulkan/cache_dir.h"
#include "../runtime/vulkan/error.h"
#include "../runtime/vulkan/instance.h"
#include "tower_run.h"
#include "towers.h"
#include "weight_update.h"

#include <fmt/format.h>

#include <algorithm>

namespace vkt {

DeviceOptions TowerRun::device_options() const {
  if (options_.device_options) return *options_.device_options;
  // Towers are where users enter the library: here it reads their environment.
  DeviceOptions options = DeviceOptions::from_environment();
  options.cache_dir = default_cache_dir();
  return options;
}

std::vector<std::uint32_t> TowerRun::remaining_devices(const std::vector<std::uint32_t>& listed) {
  std::vector<DeviceOptions>& per_tower = options_.tower_device_options;
  if (!per_tower.empty() && per_tower.size() != listed.size()) {
    throw Error(fmt::format(
        "ReplicateOptions::tower_device_options has {} entries for {} towers; give one per tower "
        "(in the order of the devices) or none",
        per_tower.size(), listed.size()));
  }
  std::vector<std::uint32_t> devices;
  std::vector<DeviceOptions> options;
  positions_.clear();
  for (std::size_t i = 0; i < listed.size(); ++i) {
    const auto& lost = distribution_.lost_towers;
    if (std::find(lost.begin(), lost.end(), static_cast<int>(i)) != lost.end()) continue;
    positions_.push_back(static_cast<int>(i));
    devices.push_back(listed[i]);
    if (!per_tower.empty()) options.push_back(per_tower[i]);
  }
  if (devices.empty()) {
    throw Error(fmt::format(
        "every one of the {} towers' devices was lost; none is left to train on", listed.size()));
  }
  per_tower = std::move(options);
  return devices;
}

std::vector<TowerRun::LostTower> TowerRun::lost_towers() const {
  std::vector<LostTower> lost;
  for (std::size_t i = 0; i < towers_->size(); ++i) {
    const Device& device = *(*towers_)[i].device;
    if (device.lost()) {
      lost.push_back({positions_[i], static_cast<int>(i), device.info().index, device.info().name});
    }
  }
  return lost;
}

Device& TowerRun::tower_device(const Instance& root, const std::vector<std::uint32_t>& devices,
                               int i) {
  const std::uint32_t index = devices[static_cast<std::size_t>(i)];
  bool shared = options_.tower_devices == TowerDevices::Shared;
  if (options_.tower_devices == TowerDevices::Auto) {
    shared = root.device(index).type != DeviceType::Cpu;
  }
  TowerDevicePool& pool = pool_ != nullptr ? *pool_ : own_pool_;
  const auto at = static_cast<std::size_t>(i);
  const std::vector<DeviceOptions>& per_tower = options_.tower_device_options;
  return pool.device(root, devices, at, shared,
                     per_tower.empty() ? device_options() : per_tower[at]);
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
