#pragma once
// Which devices the towers run on: all (the default choice), gpu, cpu, or
// indices that may repeat.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "../runtime/vulkan/device_info.h"

namespace vkt {

class Instance;

/// Parses a device list over a machine's `devices` (Instance::devices()):
///  - "all": the default choice, choose_default_devices (every usable GPU; the
///    CPU devices only when no GPU is usable); not every device;
///  - "gpu": every usable GPU; "cpu": every usable CPU device (lavapipe);
///  - otherwise comma-separated indices, honoured as written: they may repeat
///    ("0,0,0" runs three towers on device 0, as the tests do on lavapipe) and
///    may mix GPUs and CPU devices.
/// Anything else, an empty list, an index past the devices, or a keyword that
/// finds no usable device is a vkt::Error naming the list, the entry, what is
/// valid and the devices present. Pure: no Vulkan (fuzzable).
///
///   auto towers = vkt::parse_device_list("0,1", instance.devices());   // {0, 1}
std::vector<std::uint32_t> parse_device_list(std::string_view spec,
                                             std::span<const DeviceInfo> devices);

/// parse_device_list over the devices of `instance`.
std::vector<std::uint32_t> parse_device_list(std::string_view spec, const Instance& instance);

/// The list from VKT_DEVICES when it is set (so any program can be moved to
/// another device set without recompiling), else `fallback`, where empty means
/// the default choice (choose_default_devices). The first time in a process
/// that VKT_DEVICES decides, it logs (info) the devices it chose and that the
/// environment overrode the program's choice.
std::vector<std::uint32_t> device_list_from_environment(const Instance& instance,
                                                        std::vector<std::uint32_t> fallback = {});

namespace detail {
/// Tests only: the next VKT_DEVICES override logs again.
void forget_device_override_log();
}  // namespace detail

}  // namespace vkt
