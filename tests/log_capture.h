#pragma once
// The library log's lines, captured for a test to read.

#include <spdlog/sinks/ringbuffer_sink.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <vktower/runtime/vulkan/detail/log.h>

namespace vkt::test {

/// The log's last `capacity` lines of `level` and above while it lives (the
/// log's own level set to `level` meanwhile).
class LogCapture {
 public:
  explicit LogCapture(spdlog::level::level_enum level = spdlog::level::info,
                      std::size_t capacity = 64)
      : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(capacity)),
        level_(vkt::detail::log().level()) {
    sink_->set_level(level);
    vkt::detail::log().set_level(level);
    vkt::detail::log().sinks().push_back(sink_);
  }
  ~LogCapture() {
    vkt::detail::log().sinks().pop_back();
    vkt::detail::log().set_level(level_);
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  std::vector<std::string> lines() const { return sink_->last_formatted(); }
  /// True when a captured line contains `text`.
  bool said(std::string_view text) const {
    const std::vector<std::string> all = lines();
    return std::any_of(all.begin(), all.end(),
                       [&](const std::string& line) { return line.find(text) != line.npos; });
  }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  spdlog::level::level_enum level_;
};

}  // namespace vkt::test
