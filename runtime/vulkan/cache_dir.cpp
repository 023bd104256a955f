#include "cache_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <system_error>

#include "../version.h"
#include "detail/log.h"

namespace vkt {
namespace {

std::string_view env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string_view() : std::string_view(value);
}

// Makes `dir` and any missing parents with mode 0700 (cache directories hold
// nothing others should read or plant). Empty on success, else why not.
std::string make_private_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  if (std::filesystem::is_directory(dir, ec)) {
    return ::access(dir.c_str(), W_OK | X_OK) == 0 ? std::string() : "it is not writable";
  }
  const std::filesystem::path parent = dir.parent_path();
  if (parent != dir && !parent.empty()) {
    if (std::string why = make_private_dir(parent); !why.empty()) return why;
  }
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return fmt::format("mkdir '{}' failed: {}", dir.string(), std::strerror(errno));
  }
  return std::filesystem::is_directory(dir, ec) ? std::string() : "it is not a directory";
}

std::optional<std::filesystem::path> no_cache(const std::string& why) {
  detail::log().info("no disk cache for pipelines and tuning: {}", why);
  return std::nullopt;
}

}  // namespace

std::optional<std::filesystem::path> default_cache_dir() {
  std::filesystem::path dir;
  if (const char* set = std::getenv("VKT_CACHE_DIR"); set != nullptr) {
    const std::string_view value(set);
    if (value.empty() || value == "off" || value == "0") return std::nullopt;
    dir = std::filesystem::path(value);
    if (!dir.is_absolute()) {
      return no_cache(fmt::format("VKT_CACHE_DIR='{}' is not an absolute path", value));
    }
  } else if (const std::string_view xdg = env("XDG_CACHE_HOME"); !xdg.empty() && xdg[0] == '/') {
    dir = std::filesystem::path(xdg) / "vktower";
  } else if (const std::string_view home = env("HOME"); !home.empty() && home[0] == '/') {
    dir = std::filesystem::path(home) / ".cache" / "vktower";
  } else {
    return no_cache("neither XDG_CACHE_HOME nor HOME is an absolute path (set VKT_CACHE_DIR)");
  }
  dir = dir.lexically_normal();
  if (const std::string why = make_private_dir(dir); !why.empty()) {
    return no_cache(fmt::format("cannot use '{}': {}", dir.string(), why));
  }
  return dir;
}

std::string DeviceCacheKey::stem() const {
  std::string uuid;
  for (const std::uint8_t b : pipeline_cache_uuid) uuid += fmt::format("{:02x}", b);
  return fmt::format("{:04x}-{:04x}-{:08x}-{}-v{}", vendor_id, device_id, driver_version, uuid,
                     version());
}

}  // namespace vkt
