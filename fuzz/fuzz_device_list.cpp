// The device-list parser (--devices, VKT_DEVICES): a vkt::Error, or indices
// that all name one of the devices, and for the keywords only usable devices of
// the kind asked for.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "../runtime/vulkan/error.h"
#include "../tower/device_choice.h"
#include "../tower/device_list.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  // The first byte picks the machine's device count (0 to 7: none is a case too),
  // the next one byte per device its type and whether it is usable.
  const std::size_t count = data[0] % 8;
  if (size < 1 + count) return 0;
  std::vector<vkt::DeviceInfo> devices(count);
  for (std::size_t i = 0; i < count; ++i) {
    devices[i].index = static_cast<std::uint32_t>(i);
    devices[i].name = "device " + std::to_string(i);
    devices[i].type = static_cast<vkt::DeviceType>(data[1 + i] % 5);
    if ((data[1 + i] & 0x80) != 0) devices[i].unusable_reason = "cannot be opened";
  }
  const std::string_view spec(reinterpret_cast<const char*>(data + 1 + count), size - 1 - count);
  std::string_view keyword = spec;
  while (!keyword.empty() && std::isspace(static_cast<unsigned char>(keyword.front()))) {
    keyword.remove_prefix(1);
  }
  try {
    const std::vector<std::uint32_t> towers = vkt::parse_device_list(spec, devices);
    if (towers.empty()) __builtin_trap();  // no tower: a run that trains nothing
    for (std::uint32_t index : towers) {
      if (index >= count) __builtin_trap();  // a tower on a device that does not exist
      const vkt::DeviceInfo& d = devices[index];
      // A keyword never picks an unusable device, nor one of the other kind.
      const bool by_keyword = !keyword.empty() && (keyword[0] < '0' || keyword[0] > '9');
      if (by_keyword && !d.unusable_reason.empty()) __builtin_trap();
      if (keyword.starts_with("gpu") && !vkt::is_gpu(d.type)) __builtin_trap();
      if (keyword.starts_with("cpu") && d.type != vkt::DeviceType::Cpu) __builtin_trap();
    }
  } catch (const vkt::Error&) {
  }
  return 0;
}
