#pragma once
// Where a sample finds its data set by default: the source tree's samples/data
// when it is there (a build tree), else the installed copy (share/vktower/data).

#include <filesystem>
#include <string>

inline std::string sample_data_file(const std::string& name) {
  for (const char* dir : {VKT_SAMPLES_DATA_DIR, VKT_INSTALLED_DATA_DIR}) {
    const std::filesystem::path path = std::filesystem::path(dir) / name;
    if (std::filesystem::exists(path)) return path.string();
  }
  return (std::filesystem::path(VKT_INSTALLED_DATA_DIR) / name).string();  // the error names it
}
