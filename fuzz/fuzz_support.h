#pragma once
// Shared by the fuzz targets: the readers take paths, so inputs go through a
// file of this process's own.

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

namespace vkt::fuzz {

/// Writes `size` bytes to a file private to this process and returns its path.
inline std::string to_file(const char* name, const std::uint8_t* data, std::size_t size) {
  const std::string path = "/tmp/vkt-fuzz-" + std::to_string(::getpid()) + "-" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

}  // namespace vkt::fuzz
