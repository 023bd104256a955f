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
  for (const Owned& o : owned_) {
    if (o.index == index && o.shared == shared && o.occurrence == occurrence) return *o.device;
  }
  DeviceOptions made = options;
  if (shared) {  // a compute queue per tower on it, as far as the device offers
    made.compute_queues =
        static_cast<std::uint32_t>(std::count(devices.begin(), devices.end(), index));
  }
  Owned o{index, shared, occurrence, own_instance(root, index), nullptr};
  o.device = std::make_unique<Device>(*o.instance, index, made);
  owned_.push_back(std::move(o));
  return *owned_.back().device;
}

void TowerDevicePool::forget_lost() {
  // Each Device goes before its Instance: erasing alone would move-assign the
  // entries after it, replacing an Instance while its Device still lives.
  for (Owned& o : owned_) {
    if (o.device && o.device->lost()) {
      o.device.reset();
      o.instance.reset();
    }
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
