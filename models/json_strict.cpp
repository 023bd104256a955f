#include "json_strict.h"

#include <fmt/format.h>

#include <optional>
#include <set>
#include <vector>

#include "../runtime/vulkan/error.h"

namespace vkt::models::detail {

using nlohmann::json;

nlohmann::json parse_json_strict(std::string_view text, const std::string& context) {
  // One key set per open object; the first repeated key is kept for the error.
  std::vector<std::set<std::string>> open_objects;
  std::optional<std::string> repeated;
  const json::parser_callback_t track_keys = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == json::parse_event_t::object_end && !open_objects.empty()) {
      open_objects.pop_back();
    } else if (event == json::parse_event_t::key && !open_objects.empty() && !repeated &&
               !open_objects.back().insert(parsed.get<std::string>()).second) {
      repeated = parsed.get<std::string>();
    }
    return true;
  };
  json value;
  try {
    value = json::parse(text.begin(), text.end(), track_keys);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: not valid JSON ({})", context, e.what()));
  }
  if (repeated) {
    throw Error(
        fmt::format("{}: key {} appears twice in one object (a damaged or hand-edited "
                    "file; keep one)",
                    context, json_quoted(*repeated)));
  }
  return value;
}

std::string json_quoted(std::string_view text) {
  return json(std::string(text)).dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace vkt::models::detail
