#pragma once
// Where vktower keeps what it learns about a device between runs (the Vulkan
// pipeline cache and the tuning cache), and how those files are named.

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace vkt {

/// The user's cache directory for vktower: $VKT_CACHE_DIR when set (empty or
/// "off" turns the disk caches off), else $XDG_CACHE_HOME/vktower, else
/// $HOME/.cache/vktower. Relative paths are not used (the XDG rule). Created with
/// mode 0700 where missing. Returns nothing, with a log line, when there is no
/// usable directory: the caches then live in memory only. Reads the environment,
/// so the library calls it only where a user's program enters it (towers made
/// without explicit DeviceOptions); pass the result as DeviceOptions::cache_dir.
std::optional<std::filesystem::path> default_cache_dir();

/// What makes a device's cache files its own: the physical device, its driver
/// build (pipelineCacheUUID changes with it) and this library's version.
struct DeviceCacheKey {
  std::uint32_t vendor_id = 0;
  std::uint32_t device_id = 0;
  std::uint32_t driver_version = 0;
  std::array<std::uint8_t, 16> pipeline_cache_uuid{};

  /// "10005-0000-00000001-<uuid hex>-v0.1.0": the stem of the device's cache files
  /// and the identity the tuning file records.
  std::string stem() const;
};

}  // namespace vkt
