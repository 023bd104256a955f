#include "device_choice.h"

#include <fmt/format.h>

namespace vkt {
namespace {

/// The default run takes the first tier that has a usable device.
enum class Tier { Gpu, Cpu, Other };

Tier tier_of(DeviceType type) {
  if (is_gpu(type)) return Tier::Gpu;
  return type == DeviceType::Cpu ? Tier::Cpu : Tier::Other;
}

/// Why a usable device outside the chosen tier is left out (so a better tier was found).
std::string left_out_reason(const DeviceInfo& d) {
  if (tier_of(d.type) == Tier::Cpu) {
    return "a GPU is present; CPU devices are used only when there is no GPU; --devices cpu or "
           "an index list picks it";
  }
  return fmt::format(
      "device type {}; used only when there is no GPU or CPU device; an index "
      "list picks it",
      to_string(d.type));
}

}  // namespace

bool is_gpu(DeviceType type) {
  return type == DeviceType::DiscreteGpu || type == DeviceType::IntegratedGpu ||
         type == DeviceType::VirtualGpu;
}

DeviceChoice choose_default_devices(std::span<const DeviceInfo> devices) {
  bool any[3] = {false, false, false};
  for (const DeviceInfo& d : devices) {
    if (d.unusable_reason.empty()) any[static_cast<int>(tier_of(d.type))] = true;
  }
  const Tier chosen = any[0] ? Tier::Gpu : any[1] ? Tier::Cpu : Tier::Other;

  DeviceChoice choice;
  for (const DeviceInfo& d : devices) {
    DeviceVerdict v;
    v.index = d.index;
    if (!d.unusable_reason.empty()) {
      v.reason = fmt::format("unusable: {}", d.unusable_reason);
    } else if (tier_of(d.type) != chosen) {
      v.reason = left_out_reason(d);
    } else {
      v.used = true;
      v.reason = chosen == Tier::Gpu   ? std::string(to_string(d.type))
                 : chosen == Tier::Cpu ? "CPU device; there is no usable GPU"
                                       : fmt::format(
                                             "device type {}; there is no usable GPU or "
                                             "CPU device",
                                             to_string(d.type));
      choice.devices.push_back(d.index);
    }
    choice.verdicts.push_back(std::move(v));
  }
  return choice;
}

std::string describe_devices(std::span<const DeviceInfo> devices) {
  if (devices.empty()) {
    return "this machine has no Vulkan device (install a Vulkan driver, e.g. "
           "mesa-vulkan-drivers for lavapipe)";
  }
  std::string out = fmt::format("this machine has {} Vulkan device{}:", devices.size(),
                                devices.size() == 1 ? "" : "s");
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const DeviceInfo& d = devices[i];
    out += fmt::format("{} {}: {} ({}{}{})", i == 0 ? "" : ";", d.index, d.name, to_string(d.type),
                       d.unusable_reason.empty() ? "" : ", unusable: ", d.unusable_reason);
  }
  return out;
}

}  // namespace vkt
