#pragma once
// vktower's logger (internal): spdlog, level from VKT_LOG_LEVEL
// (trace, debug, info, warn, error, critical, off; default info).

#include <spdlog/spdlog.h>

namespace vkt::detail {

spdlog::logger& log();

}  // namespace vkt::detail
