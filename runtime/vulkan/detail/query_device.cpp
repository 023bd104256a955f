#include "query_device.h"

#include <fmt/format.h>

#include <cstring>
#include <vector>

namespace vkt::detail {
namespace {

std::string vendor_name(std::uint32_t id) {
  switch (id) {
    case 0x10DE:
      return "NVIDIA";
    case 0x1002:
      return "AMD";
    case 0x8086:
      return "Intel";
    case 0x13B5:
      return "ARM";
    case 0x5143:
      return "Qualcomm";
    case 0x1010:
      return "Imagination";
    case 0x106B:
      return "Apple";
    case 0x10005:
      return "Mesa";
    default:
      return fmt::format("0x{:04x}", id);
  }
}

std::string version_string(std::uint32_t v) {
  return fmt::format("{}.{}.{}", VK_API_VERSION_MAJOR(v), VK_API_VERSION_MINOR(v),
                     VK_API_VERSION_PATCH(v));
}

// Drivers encode their version differently; NVIDIA's is the one common exception
// to the Vulkan packing.
std::string driver_version_string(std::uint32_t vendor, std::uint32_t v) {
  if (vendor == 0x10DE) {
    return fmt::format("{}.{}.{}", (v >> 22) & 0x3ff, (v >> 14) & 0xff, (v >> 6) & 0xff);
  }
  return version_string(v);
}

DeviceType device_type(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return DeviceType::IntegratedGpu;
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return DeviceType::DiscreteGpu;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return DeviceType::VirtualGpu;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return DeviceType::Cpu;
    default:
      return DeviceType::Other;
  }
}

/// The f16 x f16 -> f32 subgroup products of VK_NV_cooperative_matrix, where
/// the device has everything the cooperative kernels use (their SPIR-V
/// declares Float16, StorageBuffer16BitAccess and the Vulkan memory model).
std::vector<CooperativeShape> cooperative_f16_shapes(VkInstance instance, VkPhysicalDevice physical,
                                                     std::uint32_t api_version,
                                                     bool storage_16bit) {
  if (api_version < VK_API_VERSION_1_2 || !storage_16bit ||
      !has_device_extension(physical, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME)) {
    return {};
  }
  VkPhysicalDeviceCooperativeMatrixFeaturesNV cooperative{};
  cooperative.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV;
  VkPhysicalDeviceShaderFloat16Int8Features float16{};
  float16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
  float16.pNext = &cooperative;
  VkPhysicalDeviceVulkanMemoryModelFeatures memory_model{};
  memory_model.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES;
  memory_model.pNext = &float16;
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features.pNext = &memory_model;
  vkGetPhysicalDeviceFeatures2(physical, &features);
  if (!cooperative.cooperativeMatrix || !float16.shaderFloat16 || !memory_model.vulkanMemoryModel) {
    return {};
  }
  const auto list = reinterpret_cast<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV>(
      vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV"));
  if (list == nullptr) return {};
  std::uint32_t count = 0;
  if (list(physical, &count, nullptr) != VK_SUCCESS) return {};
  std::vector<VkCooperativeMatrixPropertiesNV> properties(count);
  for (VkCooperativeMatrixPropertiesNV& p : properties) {
    p.sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV;
  }
  if (list(physical, &count, properties.data()) != VK_SUCCESS) return {};
  std::vector<CooperativeShape> shapes;
  for (const VkCooperativeMatrixPropertiesNV& p : properties) {
    if (p.AType == VK_COMPONENT_TYPE_FLOAT16_NV && p.BType == VK_COMPONENT_TYPE_FLOAT16_NV &&
        p.CType == VK_COMPONENT_TYPE_FLOAT32_NV && p.DType == VK_COMPONENT_TYPE_FLOAT32_NV &&
        p.scope == VK_SCOPE_SUBGROUP_NV) {
      shapes.push_back({p.MSize, p.NSize, p.KSize});
    }
  }
  return shapes;
}

}  // namespace

bool has_device_extension(VkPhysicalDevice physical, const char* name) {
  std::uint32_t count = 0;
  vkEnumerateDeviceExtensionProperties(physical, nullptr, &count, nullptr);
  std::vector<VkExtensionProperties> extensions(count);
  vkEnumerateDeviceExtensionProperties(physical, nullptr, &count, extensions.data());
  for (const VkExtensionProperties& e : extensions) {
    if (std::strcmp(e.extensionName, name) == 0) return true;
  }
  return false;
}

QueueFamilies find_queue_families(VkPhysicalDevice physical) {
  std::uint32_t count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &count, nullptr);
  std::vector<VkQueueFamilyProperties> families(count);
  vkGetPhysicalDeviceQueueFamilyProperties(physical, &count, families.data());
  QueueFamilies found;
  for (std::uint32_t i = 0; i < count; ++i) {
    const VkQueueFlags flags = families[i].queueFlags;
    if ((flags & VK_QUEUE_COMPUTE_BIT) && found.compute == UINT32_MAX) {
      found.compute = i;
      found.compute_queues = families[i].queueCount;
    }
    const bool transfer_only = (flags & VK_QUEUE_TRANSFER_BIT) &&
                               !(flags & (VK_QUEUE_COMPUTE_BIT | VK_QUEUE_GRAPHICS_BIT));
    if (transfer_only && found.transfer == UINT32_MAX) found.transfer = i;
  }
  return found;
}

DeviceInfo query_device_info(VkInstance instance, VkPhysicalDevice physical, std::uint32_t index) {
  VkPhysicalDeviceDriverProperties driver{};
  driver.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
  VkPhysicalDeviceSubgroupProperties subgroup{};
  subgroup.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES;
  VkPhysicalDeviceMaintenance3Properties maintenance3{};
  maintenance3.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES;
  subgroup.pNext = &maintenance3;

  VkPhysicalDeviceProperties basic{};
  vkGetPhysicalDeviceProperties(physical, &basic);
  // VkPhysicalDeviceDriverProperties is core only from 1.2 (or VK_KHR_driver_properties).
  const bool has_driver_props = basic.apiVersion >= VK_API_VERSION_1_2;
  if (has_driver_props) maintenance3.pNext = &driver;
  VkPhysicalDeviceProperties2 props{};
  props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  props.pNext = &subgroup;
  vkGetPhysicalDeviceProperties2(physical, &props);
  const VkPhysicalDeviceLimits& limits = props.properties.limits;

  VkPhysicalDeviceTimelineSemaphoreFeatures timeline{};
  timeline.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES;
  VkPhysicalDevice16BitStorageFeatures storage16{};
  storage16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
  timeline.pNext = &storage16;
  VkPhysicalDeviceFeatures2 features{};
  features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
  features.pNext = &timeline;
  vkGetPhysicalDeviceFeatures2(physical, &features);

  DeviceInfo info;
  info.index = index;
  info.name = props.properties.deviceName;
  info.type = device_type(props.properties.deviceType);
  info.vendor_id = props.properties.vendorID;
  info.vendor = vendor_name(info.vendor_id);
  info.device_id = props.properties.deviceID;
  if (has_driver_props) {
    info.driver_name = driver.driverName;
    info.driver_info = driver.driverInfo;
    info.is_lavapipe = driver.driverID == VK_DRIVER_ID_MESA_LLVMPIPE;
  }
  info.driver_version = driver_version_string(info.vendor_id, props.properties.driverVersion);
  info.api_version_raw = props.properties.apiVersion;
  info.api_version = version_string(props.properties.apiVersion);
  info.max_allocation_bytes = maintenance3.maxMemoryAllocationSize;
  info.max_storage_buffer_range = limits.maxStorageBufferRange;
  for (int i = 0; i < 3; ++i) info.max_workgroup_size[i] = limits.maxComputeWorkGroupSize[i];
  info.max_workgroup_invocations = limits.maxComputeWorkGroupInvocations;
  info.max_shared_memory_bytes = limits.maxComputeSharedMemorySize;
  info.subgroup_size = subgroup.subgroupSize;
  const VkSubgroupFeatureFlags needed = VK_SUBGROUP_FEATURE_BASIC_BIT |
                                        VK_SUBGROUP_FEATURE_BALLOT_BIT |
                                        VK_SUBGROUP_FEATURE_ARITHMETIC_BIT;
  info.subgroup_compute_ops = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                              (subgroup.supportedOperations & needed) == needed;
  info.timestamp_period_ns = limits.timestampPeriod;
  info.timeline_semaphores = timeline.timelineSemaphore == VK_TRUE;
  info.storage_16bit = storage16.storageBuffer16BitAccess == VK_TRUE;
  info.cooperative_f16 =
      cooperative_f16_shapes(instance, physical, info.api_version_raw, info.storage_16bit);

  VkPhysicalDeviceMemoryProperties memory{};
  vkGetPhysicalDeviceMemoryProperties(physical, &memory);
  std::vector<bool> heap_host_visible(memory.memoryHeapCount, false);
  bool every_local_type_mappable = true;
  bool any_local_type = false;
  for (std::uint32_t t = 0; t < memory.memoryTypeCount; ++t) {
    const VkMemoryPropertyFlags f = memory.memoryTypes[t].propertyFlags;
    if (f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)
      heap_host_visible[memory.memoryTypes[t].heapIndex] = true;
    if (f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) {
      any_local_type = true;
      const VkMemoryPropertyFlags mappable =
          VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
      if ((f & mappable) != mappable) every_local_type_mappable = false;
    }
  }
  info.unified_memory = any_local_type && every_local_type_mappable;
  for (std::uint32_t h = 0; h < memory.memoryHeapCount; ++h) {
    if (memory.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      info.device_local_bytes += memory.memoryHeaps[h].size;
    if (heap_host_visible[h]) info.host_visible_bytes += memory.memoryHeaps[h].size;
  }

  const QueueFamilies families = find_queue_families(physical);
  info.dedicated_transfer_queue = families.transfer != UINT32_MAX;
  if (families.compute != UINT32_MAX) {
    std::uint32_t count = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &count, nullptr);
    std::vector<VkQueueFamilyProperties> all(count);
    vkGetPhysicalDeviceQueueFamilyProperties(physical, &count, all.data());
    info.timestamps = all[families.compute].timestampValidBits > 0 && limits.timestampPeriod > 0;
  }

  if (basic.apiVersion < VK_API_VERSION_1_1) {
    info.unusable_reason =
        fmt::format("supports Vulkan {} only; vktower needs 1.1 or newer", info.api_version);
  } else if (families.compute == UINT32_MAX) {
    info.unusable_reason = "has no compute queue";
  } else if (!info.timeline_semaphores) {
    info.unusable_reason =
        "lacks timeline semaphores (Vulkan 1.2 or VK_KHR_timeline_semaphore); "
        "update the driver";
  }
  return info;
}

}  // namespace vkt::detail
