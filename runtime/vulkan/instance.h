#pragma once
// The Vulkan instance: loader, validation layer, device enumeration.

#include <vulkan/vulkan_core.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "device_info.h"

namespace vkt {

/// How an Instance is made. from_environment() reads VKT_VALIDATION=1.
struct InstanceOptions {
  /// Enable VK_LAYER_KHRONOS_validation and count its messages.
  bool validation = false;
  std::string application_name = "vktower";

  static InstanceOptions from_environment();
};

/// One VkInstance. Enumerates the machine's Vulkan devices; Devices are made
/// from it and must not outlive it. With validation on, every validation
/// message goes to the log and is counted; tests assert the counts stay zero.
///
///   vkt::Instance instance;                     // VKT_VALIDATION=1 turns the layer on
///   for (const vkt::DeviceInfo& d : instance.devices())
///     std::cout << d.index << ": " << d.name << "\n";
///   vkt::Device device(instance, 0);
class Instance {
 public:
  explicit Instance(InstanceOptions options = InstanceOptions::from_environment());
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;
  Instance(Instance&&) = delete;
  Instance& operator=(Instance&&) = delete;

  /// Every physical device, in the loader's order. May be empty.
  const std::vector<DeviceInfo>& devices() const { return infos_; }
  /// The device at `index`; throws vkt::Error listing the devices when out of range.
  const DeviceInfo& device(std::uint32_t index) const;

  bool validation_enabled() const { return options_.validation; }
  /// Validation messages of severity warning / error seen by this instance.
  std::uint64_t validation_warnings() const;
  std::uint64_t validation_errors() const;
  /// Warnings and errors seen by every Instance of this process, living or gone.
  static std::uint64_t process_validation_messages();

  /// Interop and runtime/vulkan internals; users do not need it.
  VkInstance vk_instance() const { return instance_; }
  VkPhysicalDevice vk_physical_device(std::uint32_t index) const;

  struct MessageCounts {
    std::atomic<std::uint64_t> warnings{0};
    std::atomic<std::uint64_t> errors{0};
  };

 private:
  void release();

  InstanceOptions options_;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  std::unique_ptr<MessageCounts> counts_ = std::make_unique<MessageCounts>();
  std::vector<VkPhysicalDevice> physical_;
  std::vector<DeviceInfo> infos_;
};

}  // namespace vkt
