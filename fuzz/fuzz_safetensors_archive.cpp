// A Hugging Face safetensors file as SafetensorsArchive opens and reads it: a
// vkt::Error, or entries whose bytes lie inside the file and read as one value
// per element.
#include <filesystem>

#include "../models/safetensors_archive.h"
#include "../runtime/vulkan/error.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = vkt::fuzz::to_file("model.safetensors", data, size);
  try {
    const auto archive = vkt::models::SafetensorsArchive::open(path);
    for (const auto& e : archive.entries()) {
      if (e.offset > size || e.bytes > size - e.offset) __builtin_trap();  // past the file
      if (!e.value_type()) continue;  // other dtypes are listed, refused when read
      if (archive.read_floats(e.name).size() != e.elements) __builtin_trap();
    }
  } catch (const vkt::Error&) {
  }
  return 0;
}
