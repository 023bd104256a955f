#include "log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>

namespace vkt::detail {

spdlog::logger& log() {
  static const std::shared_ptr<spdlog::logger> logger = [] {
    auto made = spdlog::stderr_color_mt("vktower");
    made->set_pattern("[%H:%M:%S.%e] [vktower] [%^%l%$] %v");
    spdlog::level::level_enum level = spdlog::level::info;
    if (const char* env = std::getenv("VKT_LOG_LEVEL"); env != nullptr && *env != '\0') {
      level = spdlog::level::from_str(env);
      // from_str answers `off` for names it does not know; say so rather than go silent.
      if (level == spdlog::level::off && std::string_view(env) != "off") {
        made->warn(
            "VKT_LOG_LEVEL={} is not a level (trace, debug, info, warn, error, off); "
            "using info",
            env);
        level = spdlog::level::info;
      }
    }
    made->set_level(level);
    return made;
  }();
  return *logger;
}

}  // namespace vkt::detail
