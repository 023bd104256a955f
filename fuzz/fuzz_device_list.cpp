// The device-list parser (--devices, VKT_DEVICES): a vkt::Error, or indices
// that all name one of the devices.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "../runtime/vulkan/error.h"
#include "../tower/device_list.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  // The first byte picks the machine's device count (0 to 7: none is a case too).
  const std::uint32_t device_count = data[0] % 8;
  const std::string_view spec(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    for (std::uint32_t index : vkt::parse_device_list(spec, device_count)) {
      if (index >= device_count) __builtin_trap();  // a tower on a device that does not exist
    }
  } catch (const vkt::Error&) {
  }
  return 0;
}
