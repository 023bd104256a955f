#include "device_list.h"

#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "../runtime/vulkan/error.h"
#include "../runtime/vulkan/instance.h"

namespace vkt {
namespace {

/// What follows an error about a device list: the devices, one a line.
std::string listing(const Instance& instance) {
  std::string out;
  for (const DeviceInfo& d : instance.devices()) out += fmt::format("\n  {}: {}", d.index, d.name);
  return out.empty() ? "; install a Vulkan driver, e.g. mesa-vulkan-drivers" : ":" + out;
}

}  // namespace

std::vector<std::uint32_t> parse_device_list(std::string_view spec, const Instance& instance) {
  try {
    return parse_device_list(spec, static_cast<std::uint32_t>(instance.devices().size()));
  } catch (const Error& e) {
    throw Error(fmt::format("{}{}", e.what(), listing(instance)));
  }
}

std::vector<std::uint32_t> device_list_from_environment(const Instance& instance,
                                                        std::vector<std::uint32_t> fallback) {
  if (const char* env = std::getenv("VKT_DEVICES"); env != nullptr) {
    try {
      return parse_device_list(env, instance);
    } catch (const Error& e) {
      throw Error(fmt::format("VKT_DEVICES: {}", e.what()));
    }
  }
  for (std::uint32_t index : fallback) (void)instance.device(index);  // throws for unknown ones
  return fallback.empty() ? parse_device_list("all", instance) : fallback;
}

}  // namespace vkt
