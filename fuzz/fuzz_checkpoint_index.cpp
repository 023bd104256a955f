// The index of a model directory: a vkt::Error or checkpoint file names only.
#include <string>

#include "../runtime/io/checkpoint_index.h"
#include "../runtime/vulkan/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const std::vector<std::string> names = vkt::detail::parse_checkpoint_index(
        std::string(reinterpret_cast<const char*>(data), size), "fuzz/checkpoint");
    for (const std::string& name : names) {
      if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
        __builtin_trap();  // a name the manager would resolve outside its directory
      }
    }
  } catch (const vkt::Error&) {
  }
  return 0;
}
