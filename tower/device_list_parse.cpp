// parse_device_list(spec, device_count): text to device indices, with no
// Vulkan, so the fuzz target links it alone (fuzz/fuzz_device_list.cpp).
#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <string>

#include "../runtime/vulkan/error.h"
#include "device_list.h"

namespace vkt {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

std::vector<std::uint32_t> parse_device_list(std::string_view spec, std::uint32_t device_count) {
  const std::string_view whole = spec;
  const std::string devices = device_count == 0   ? "no Vulkan device"
                              : device_count == 1 ? "1 Vulkan device (0)"
                                                  : fmt::format("{} Vulkan devices (0..{})",
                                                                device_count, device_count - 1);
  spec = trim(spec);
  if (spec.empty()) {
    throw Error(fmt::format(
        "device list '{}' names no device; write 'all' or indices like 0,0,1 (this machine has {})",
        whole, devices));
  }
  std::vector<std::uint32_t> out;
  if (spec == "all") {
    if (device_count == 0) throw Error("device list 'all': this machine has no Vulkan device");
    for (std::uint32_t i = 0; i < device_count; ++i) out.push_back(i);
    return out;
  }
  while (true) {
    const std::size_t comma = spec.find(',');
    const std::string_view token = trim(spec.substr(0, comma));
    std::uint32_t index = 0;
    const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), index);
    if (token.empty() || ec != std::errc() || end != token.data() + token.size()) {
      throw Error(fmt::format(
          "device list '{}': '{}' is not a device index; write 'all' or indices like 0,0,1 "
          "(this machine has {})",
          whole, token, devices));
    }
    if (index >= device_count) {
      throw Error(fmt::format("device list '{}': device {} does not exist; this machine has {}",
                              whole, index, devices));
    }
    out.push_back(index);
    if (comma == std::string_view::npos) break;
    spec.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace vkt
