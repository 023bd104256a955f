#pragma once
// Which devices the towers run on: "all", or indices that may repeat.

#include <cstdint>
#include <string_view>
#include <vector>

namespace vkt {

class Instance;

/// Parses a device list: "all" (or empty) means every device of `instance`;
/// otherwise comma-separated indices into instance.devices(), which may repeat
/// ("0,0,0" runs three towers on device 0, as the tests do on lavapipe).
/// Throws vkt::Error naming the bad entry and listing the devices.
///
///   auto towers = vkt::parse_device_list("0,1", instance);   // {0, 1}
std::vector<std::uint32_t> parse_device_list(std::string_view spec, const Instance& instance);

/// The list from VKT_DEVICES when it is set (so any program can be moved to
/// another device set without recompiling), else `fallback` (empty = all).
std::vector<std::uint32_t> device_list_from_environment(const Instance& instance,
                                                        std::vector<std::uint32_t> fallback = {});

}  // namespace vkt
