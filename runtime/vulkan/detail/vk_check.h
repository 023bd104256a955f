#pragma once
// Turns VkResult failures into vkt::Error (internal to runtime/vulkan).

#include <vulkan/vulkan_core.h>

#include <string_view>

namespace vkt::detail {

/// "VK_ERROR_OUT_OF_DEVICE_MEMORY" for VK_ERROR_OUT_OF_DEVICE_MEMORY, and so on.
std::string_view result_name(VkResult result);

/// Throws vkt::Error naming the call and the result unless `result` is VK_SUCCESS
/// (or another non-negative status code, which is not a failure).
void check(VkResult result, std::string_view call);

}  // namespace vkt::detail

#define VKT_CHECK(call) ::vkt::detail::check((call), #call)
