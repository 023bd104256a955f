// read_npy on any bytes: a vkt::Error or an array whose values match its shape.
#include <cstdio>

#include "../runtime/io/npy.h"
#include "../runtime/vulkan/error.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = vkt::fuzz::to_file("npy", data, size);
  try {
    const vkt::NpyArray a = vkt::read_npy(path);
    std::size_t count = 1;
    for (const std::int64_t d : a.shape) count *= static_cast<std::size_t>(d);
    if ((a.integer ? a.i32.size() : a.f32.size()) != count) __builtin_trap();
  } catch (const vkt::Error&) {
  }
  std::remove(path.c_str());
  return 0;
}
