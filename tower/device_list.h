#pragma once
// Which devices the towers run on: "all", or indices that may repeat.

#include <cstdint>
#include <string_view>
#include <vector>

namespace vkt {

class Instance;

/// Parses a device list: "all" means every one of `device_count` devices;
/// otherwise comma-separated indices below `device_count`, which may repeat
/// ("0,0,0" runs three towers on device 0, as the tests do on lavapipe). An
/// empty list, an entry that is not an index, or an index past the devices is
/// a vkt::Error naming the list and the entry. Pure: no Vulkan (fuzzable).
///
///   auto towers = vkt::parse_device_list("0,1", 2);   // {0, 1}
std::vector<std::uint32_t> parse_device_list(std::string_view spec, std::uint32_t device_count);

/// parse_device_list over the devices of `instance`; its errors list them.
std::vector<std::uint32_t> parse_device_list(std::string_view spec, const Instance& instance);

/// The list from VKT_DEVICES when it is set (so any program can be moved to
/// another device set without recompiling), else `fallback` (empty = all).
std::vector<std::uint32_t> device_list_from_environment(const Instance& instance,
                                                        std::vector<std::uint32_t> fallback = {});

}  // namespace vkt
