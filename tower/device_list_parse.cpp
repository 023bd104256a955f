// parse_device_list(spec, devices): text to device indices, with no Vulkan, so
// the fuzz target links it alone (fuzz/fuzz_device_list.cpp).
#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <string>

#include "../runtime/vulkan/error.h"
#include "device_choice.h"
#include "device_list.h"

namespace vkt {
namespace {

constexpr const char* kValid = "write all, gpu, cpu or indices like 0,0,1";

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

/// `gpu` or `cpu`: every usable device of that kind, in index order.
std::vector<std::uint32_t> of_kind(std::string_view whole, bool gpu,
                                   std::span<const DeviceInfo> devices) {
  std::vector<std::uint32_t> out;
  for (const DeviceInfo& d : devices) {
    const bool kind = gpu ? is_gpu(d.type) : d.type == DeviceType::Cpu;
    if (kind && d.unusable_reason.empty()) out.push_back(d.index);
  }
  if (out.empty()) {
    throw Error(fmt::format("device list '{}': no usable {} device; {}; write {} or indices", whole,
                            gpu ? "GPU" : "CPU", describe_devices(devices),
                            gpu ? "all, cpu" : "all, gpu"));
  }
  return out;
}

}  // namespace

std::vector<std::uint32_t> parse_device_list(std::string_view spec,
                                             std::span<const DeviceInfo> devices) {
  const std::string_view whole = spec;
  const auto count = static_cast<std::uint32_t>(devices.size());
  spec = trim(spec);
  if (spec.empty()) {
    throw Error(fmt::format("device list '{}' names no device; {} ({})", whole, kValid,
                            describe_devices(devices)));
  }
  if (spec == "all") {
    std::vector<std::uint32_t> out = choose_default_devices(devices).devices;
    if (out.empty()) {
      throw Error(fmt::format("device list '{}': no usable Vulkan device; {}", whole,
                              describe_devices(devices)));
    }
    return out;
  }
  if (spec == "gpu" || spec == "cpu") return of_kind(whole, spec == "gpu", devices);
  std::vector<std::uint32_t> out;
  while (true) {
    const std::size_t comma = spec.find(',');
    const std::string_view token = trim(spec.substr(0, comma));
    std::uint32_t index = 0;
    const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), index);
    if (token.empty() || ec != std::errc() || end != token.data() + token.size()) {
      throw Error(fmt::format("device list '{}': '{}' is not a device index; {} ({})", whole, token,
                              kValid, describe_devices(devices)));
    }
    if (index >= count) {
      throw Error(fmt::format("device list '{}': device {} does not exist; {}", whole, index,
                              describe_devices(devices)));
    }
    out.push_back(index);
    if (comma == std::string_view::npos) break;
    spec.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace vkt
