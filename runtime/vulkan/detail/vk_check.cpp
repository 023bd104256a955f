#include "vk_check.h"

#include <fmt/format.h>

#include "../error.h"

namespace vkt::detail {

std::string_view result_name(VkResult result) {
  switch (result) {
#define VKT_RESULT(name) \
  case name:             \
    return #name;
    VKT_RESULT(VK_SUCCESS)
    VKT_RESULT(VK_NOT_READY)
    VKT_RESULT(VK_TIMEOUT)
    VKT_RESULT(VK_EVENT_SET)
    VKT_RESULT(VK_EVENT_RESET)
    VKT_RESULT(VK_INCOMPLETE)
    VKT_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
    VKT_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    VKT_RESULT(VK_ERROR_INITIALIZATION_FAILED)
    VKT_RESULT(VK_ERROR_DEVICE_LOST)
    VKT_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
    VKT_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
    VKT_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
    VKT_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
    VKT_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
    VKT_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
    VKT_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
    VKT_RESULT(VK_ERROR_FRAGMENTED_POOL)
    VKT_RESULT(VK_ERROR_UNKNOWN)
    VKT_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
    VKT_RESULT(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    VKT_RESULT(VK_ERROR_FRAGMENTATION)
    VKT_RESULT(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    VKT_RESULT(VK_PIPELINE_COMPILE_REQUIRED)
    VKT_RESULT(VK_ERROR_VALIDATION_FAILED_EXT)
#undef VKT_RESULT
    default:
      return "VK_RESULT_UNKNOWN";
  }
}

void check(VkResult result, std::string_view call) {
  if (result >= 0) return;
  std::string hint;
  switch (result) {
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_OUT_OF_HOST_MEMORY:
      hint =
          " (the device ran out of memory: use smaller buffers or batches, or fewer towers "
          "on this device)";
      break;
    case VK_ERROR_DEVICE_LOST:
      hint =
          " (the device was lost: a shader ran too long or faulted; the Device must be "
          "recreated)";
      break;
    case VK_ERROR_INCOMPATIBLE_DRIVER:
      hint =
          " (no usable Vulkan driver: install one, e.g. `apt-get install mesa-vulkan-drivers` "
          "for the lavapipe CPU device)";
      break;
    default:
      break;
  }
  throw Error(fmt::format("Vulkan call failed with {} ({}): {}{}", result_name(result),
                          static_cast<int>(result), call, hint));
}

}  // namespace vkt::detail
