// Misuses Vulkan on purpose (a buffer of size 0, which VUID-VkBufferCreateInfo-size-00912
// forbids) and prints how many validation errors the Instance counted. The ctest
// test around it passes only when the count is positive: proof that the validation
// gate of the other tests is really on.
#include <cstdio>

#include <vktower/runtime/vulkan/device.h>
#include <vktower/runtime/vulkan/instance.h>

int main() {
  vkt::Instance instance;
  if (!instance.validation_enabled()) {
    std::printf("validation is off: run with VKT_VALIDATION=1\n");
    return 1;
  }
  vkt::Device device(instance, 0);
  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.size = 0;  // invalid
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  VkBuffer buffer = VK_NULL_HANDLE;
  if (vkCreateBuffer(device.vk_device(), &info, nullptr, &buffer) == VK_SUCCESS) {
    vkDestroyBuffer(device.vk_device(), buffer, nullptr);
  }
  std::printf("validation errors reported: %llu\n",
              static_cast<unsigned long long>(instance.validation_errors()));
  return 0;
}
