// Device memory: allocations for buffers, host memory imported, freeing.
#include <fmt/format.h>

#include "detail/vk_check.h"
#include "device.h"
#include "error.h"

namespace vkt {
namespace {

std::string gib(std::uint64_t bytes) {
  return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
}

}  // namespace

Device::Allocation Device::allocate(const VkMemoryRequirements& requirements, bool host_visible,
                                    const std::string& what) {
  const VkMemoryPropertyFlags mapped =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  // Ranked wishes: staging wants mapped (cached helps reads back); storage wants
  // device-local, mapped as well where the device has unified memory.
  std::vector<VkMemoryPropertyFlags> wishes;
  if (host_visible) {
    wishes = {mapped | VK_MEMORY_PROPERTY_HOST_CACHED_BIT, mapped};
  } else {
    wishes = {VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0};
  }
  std::uint32_t type = UINT32_MAX;
  for (VkMemoryPropertyFlags wish : wishes) {
    for (std::uint32_t t = 0; t < memory_.memoryTypeCount && type == UINT32_MAX; ++t) {
      const VkMemoryPropertyFlags f = memory_.memoryTypes[t].propertyFlags;
      if ((requirements.memoryTypeBits & (1u << t)) && (f & wish) == wish) type = t;
    }
    if (type != UINT32_MAX) break;
  }
  if (type == UINT32_MAX) {
    throw Error(
        fmt::format("device {} ({}) has no memory type for {}", info_.index, info_.name, what));
  }
  const VkDeviceSize heap_size = memory_.memoryHeaps[memory_.memoryTypes[type].heapIndex].size;
  if (requirements.size > heap_size ||
      (info_.max_allocation_bytes != 0 && requirements.size > info_.max_allocation_bytes)) {
    throw Error(fmt::format(
        "{} needs {} but device {} ({}) can allocate at most {} at once (its memory heap holds "
        "{}): use smaller buffers or split the data",
        what, gib(requirements.size), info_.index, info_.name,
        gib(info_.max_allocation_bytes != 0
                ? std::min<VkDeviceSize>(info_.max_allocation_bytes, heap_size)
                : heap_size),
        gib(heap_size)));
  }

  VkMemoryAllocateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  info.allocationSize = requirements.size;
  info.memoryTypeIndex = type;
  Allocation allocation;
  const VkResult result = vkAllocateMemory(device_, &info, nullptr, &allocation.memory);
  if (result == VK_ERROR_OUT_OF_DEVICE_MEMORY || result == VK_ERROR_OUT_OF_HOST_MEMORY) {
    throw Error(fmt::format(
        "device {} ({}) is out of memory allocating {} for {} ({} in use by "
        "vktower on it): free buffers, or use smaller batches or models",
        info_.index, info_.name, gib(requirements.size), what, gib(allocated_bytes_.load())));
  }
  VKT_CHECK(result);
  allocation.bytes = requirements.size;
  const bool want_map = host_visible || maps_storage_;
  if (want_map && (memory_.memoryTypes[type].propertyFlags & mapped) == mapped) {
    const VkResult map_result =
        vkMapMemory(device_, allocation.memory, 0, VK_WHOLE_SIZE, 0, &allocation.mapped);
    if (map_result != VK_SUCCESS) {
      vkFreeMemory(device_, allocation.memory, nullptr);
      detail::check(map_result, "vkMapMemory");
    }
  }
  allocations_.fetch_add(1);
  allocated_bytes_.fetch_add(allocation.bytes);
  return allocation;
}

Device::Allocation Device::import_host(void* pointer, std::size_t bytes,
                                       const VkMemoryRequirements& requirements,
                                       const std::string& what) {
  if (host_import_alignment_ == 0 || bytes < requirements.size ||
      bytes % host_import_alignment_ != 0 ||
      reinterpret_cast<std::uintptr_t>(pointer) % host_import_alignment_ != 0) {
    throw Error(
        fmt::format("internal: {} cannot import {} bytes of host memory here", what, bytes));
  }
  VkMemoryHostPointerPropertiesEXT properties{};
  properties.sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT;
  VKT_CHECK(host_pointer_properties_(
      device_, VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT, pointer, &properties));
  const std::uint32_t types = properties.memoryTypeBits & requirements.memoryTypeBits;
  std::uint32_t type = UINT32_MAX;
  for (std::uint32_t t = 0; t < memory_.memoryTypeCount && type == UINT32_MAX; ++t) {
    if (types & (1u << t)) type = t;
  }
  if (type == UINT32_MAX) {
    throw Error(fmt::format("device {} ({}) has no memory type to import host memory for {}",
                            info_.index, info_.name, what));
  }
  VkImportMemoryHostPointerInfoEXT import{};
  import.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT;
  import.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
  import.pHostPointer = pointer;
  VkMemoryAllocateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  info.pNext = &import;
  info.allocationSize = bytes;
  info.memoryTypeIndex = type;
  Allocation allocation;
  VKT_CHECK(vkAllocateMemory(device_, &info, nullptr, &allocation.memory));
  allocation.mapped = pointer;
  allocation.bytes = bytes;
  allocations_.fetch_add(1);
  allocated_bytes_.fetch_add(bytes);
  return allocation;
}

void Device::free(Allocation& allocation) {
  if (allocation.memory == VK_NULL_HANDLE) return;
  vkFreeMemory(device_, allocation.memory, nullptr);  // unmaps implicitly
  allocated_bytes_.fetch_sub(allocation.bytes);
  allocation = {};
}

}  // namespace vkt
