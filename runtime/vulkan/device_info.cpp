// DeviceInfo's words, with no Vulkan: the device choice (tower/device_choice.cpp)
// and its fuzz target use them without an Instance.
#include "device_info.h"

namespace vkt {

std::string_view to_string(DeviceType type) {
  switch (type) {
    case DeviceType::IntegratedGpu:
      return "integrated GPU";
    case DeviceType::DiscreteGpu:
      return "discrete GPU";
    case DeviceType::VirtualGpu:
      return "virtual GPU";
    case DeviceType::Cpu:
      return "CPU";
    default:
      return "other";
  }
}

}  // namespace vkt
