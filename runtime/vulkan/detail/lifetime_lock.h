#pragma once
// Orders the creation and destruction of Vulkan instances and devices against
// the pipeline builds that run on worker threads (internal).
//
// Vulkan allows both at once. The Khronos validation layer (1.3.239) did not
// take it: one full test run reported "Invalid VkDevice" for a build's
// vkDestroyShaderModule while its device was alive and the main thread was
// making another instance (the layer keeps its per-instance and per-device
// data in process-wide maps). Builds hold this lock shared; instance and
// device creation and destruction hold it alone. The cost: making or
// destroying a device waits for the builds already under way.

#include <shared_mutex>

namespace vkt::detail {

inline std::shared_mutex& lifetime_lock() {
  // Never destroyed: an Instance or Device destroyed during static destruction
  // (a user's global) still finds it.
  static auto* lock = new std::shared_mutex;
  return *lock;
}

}  // namespace vkt::detail
