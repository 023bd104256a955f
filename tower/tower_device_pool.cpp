#include "tower_device_pool.h"

#include <fmt/format.h>

#include <algorithm>

#include "../runtime/vulkan/error.h"

namespace vkt {

Device& TowerDevicePool::device(const Instance& root, const std::vector<std::uint32_t>& devices,
                                std::size_t position, bool shared, const DeviceOptions& options) {
  const std::uint32_t index = devices.at(position);
  const auto before = static_cast<std::size_t>(
      std::count(devices.begin(), devices.begin() + static_cast<std::ptrdiff_t>(position), index));
  const std::size_t occurrence = shared ? 0 : before;
  DeviceOptions made = options;
  if (shared) {  // a compute queue per tower on it, as far as the device offers
    made.compute_queues =
        static_cast<std::uint32_t>(std::count(devices.begin(), devices.end(), index));
  }
  for (const Owned& o : owned_) {
    // A Device's options as they are now: a program may have switched its
    // kernels since it was made.
    if (o.index == index && o.shared == shared && o.occurrence == occurrence &&
        o.device->options() == made) {
      return *o.device;
    }
  }
  Owned o{index, shared, occurrence, own_instance(root, index), nullptr};
  o.device = std::make_unique<Device>(*o.instance, index, made);
  owned_.push_back(std::move(o));
  return *owned_.back().device;
}

std::vector<Device*> TowerDevicePool::devices() const {
  std::vector<Device*> all;
  for (const Owned& o : owned_) all.push_back(o.device.get());
  return all;
}

void TowerDevicePool::forget_lost() {
  for (Owned& o : owned_) {
    if (o.device->lost()) lost_.push_back(std::move(o));
  }
  std::erase_if(owned_, [](const Owned& o) { return !o.device; });
}

std::unique_ptr<Instance> TowerDevicePool::own_instance(const Instance& root, std::uint32_t index) {
  auto instance = std::make_unique<Instance>(
      InstanceOptions{.validation = root.validation_enabled(), .application_name = "vktower"});
  if (index >= instance->devices().size() ||
      instance->devices()[index].name != root.device(index).name) {
    throw Error(
        fmt::format("device {} ({}) is not listed at the same index by a second Vulkan "
                    "instance; the towers cannot each have their own instance",
                    index, root.device(index).name));
  }
  return instance;
}

}  // namespace vkt
