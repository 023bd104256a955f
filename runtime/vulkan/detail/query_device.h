#pragma once
// Reads a physical device's properties into a DeviceInfo (internal).

#include <vulkan/vulkan_core.h>

#include "../device_info.h"

namespace vkt::detail {

/// `instance` resolves the extension queries (cooperative matrices).
DeviceInfo query_device_info(VkInstance instance, VkPhysicalDevice physical, std::uint32_t index);

/// Whether `physical` offers device extension `name`.
bool has_device_extension(VkPhysicalDevice physical, const char* name);

/// Queue families a Device uses: compute (always) and a transfer-only family if any.
struct QueueFamilies {
  std::uint32_t compute = UINT32_MAX;
  std::uint32_t transfer = UINT32_MAX;  ///< UINT32_MAX when there is no dedicated one
  std::uint32_t compute_queues = 0;     ///< queues the compute family offers
};
QueueFamilies find_queue_families(VkPhysicalDevice physical);

}  // namespace vkt::detail
