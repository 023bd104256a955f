#pragma once
// Where a sample finds its data set when --data is not given: $VKT_DATA_DIR
// when set, else the source tree's samples/data (a build tree) and then the
// installed copy (share/vktower/data). Looked up only after the flags are
// parsed, so --help and --data never touch these directories.

#include <fmt/format.h>

#include <vktower/runtime/vulkan/error.h>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

/// The directories sample_data_file looks in, in order.
inline std::vector<std::string> sample_data_dirs() {
  if (const char* env = std::getenv("VKT_DATA_DIR"); env != nullptr) {
    if (*env == '\0') {
      throw vkt::Error(
          "VKT_DATA_DIR is set but empty; set it to the samples' data directory, or unset it");
    }
    return {env};
  }
  return {VKT_SAMPLES_DATA_DIR, VKT_INSTALLED_DATA_DIR};
}

/// What --help says about the default of --data.
inline std::string sample_data_help(const std::string& name) {
  return fmt::format("default: {} in $VKT_DATA_DIR, else in {} or {}", name, VKT_SAMPLES_DATA_DIR,
                     VKT_INSTALLED_DATA_DIR);
}

/// The path of data set `name` in the first data directory that holds it. A
/// directory that cannot be searched (no permission, a symlink loop), or no
/// directory holding the file, is a vkt::Error naming the directory and --data.
inline std::string sample_data_file(const std::string& name) {
  const std::vector<std::string> dirs = sample_data_dirs();
  for (const std::string& dir : dirs) {
    const std::filesystem::path path = std::filesystem::path(dir) / name;
    std::error_code ec;
    const bool found = std::filesystem::exists(path, ec);
    if (ec) {
      throw vkt::Error(fmt::format(
          "cannot look for {} in the data directory {}: {}; give the data file with --data FILE",
          name, dir, ec.message()));
    }
    if (found) return path.string();
  }
  throw vkt::Error(
      fmt::format("{} is in none of the data directories ({}); give the data file "
                  "with --data FILE, or set VKT_DATA_DIR",
                  name, fmt::join(dirs, ", ")));
}
