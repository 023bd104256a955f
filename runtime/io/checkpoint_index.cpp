#include "checkpoint_index.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "../vulkan/error.h"

namespace vkt::detail {
namespace {

using nlohmann::json;

constexpr std::string_view kPrefix = "ckpt-";
constexpr std::string_view kSuffix = ".safetensors";

}  // namespace

bool is_checkpoint_file_name(std::string_view name) {
  if (name.size() <= kPrefix.size() + kSuffix.size() || !name.starts_with(kPrefix) ||
      !name.ends_with(kSuffix)) {
    return false;
  }
  const std::string_view digits =
      name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  std::uint64_t step = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  return ec == std::errc() && end == digits.data() + digits.size() &&
         digits.find_first_not_of("0123456789") == std::string_view::npos &&
         checkpoint_file_name(step) == name;
}

std::string checkpoint_file_name(std::uint64_t step) {
  return fmt::format("{}{}{}", kPrefix, step, kSuffix);
}

std::vector<std::string> parse_checkpoint_index(const std::string& text, const std::string& path) {
  const auto corrupt = [&](const std::string& why) {
    return Error(
        fmt::format("checkpoint index '{}' is corrupt ({}); delete it to start over, or "
                    "load a checkpoint file of that directory directly",
                    path, why));
  };
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw corrupt(e.what());
  }
  const auto all = j.is_object() ? j.find("all") : j.end();
  const auto latest = j.is_object() ? j.find("latest") : j.end();
  if (all == j.end() || !all->is_array() || all->empty() || latest == j.end() ||
      !latest->is_string()) {
    throw corrupt("it needs a non-empty \"all\" array and a \"latest\" string");
  }
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const json& name : *all) {
    const std::string quoted = name.dump(-1, ' ', false, json::error_handler_t::replace);
    if (!name.is_string() || !is_checkpoint_file_name(name.get<std::string>())) {
      throw corrupt(fmt::format("{} is not a file name ckpt-<step>.safetensors", quoted));
    }
    if (!seen.insert(name.get<std::string>()).second) {
      throw corrupt(fmt::format("{} is listed twice", quoted));
    }
    names.push_back(name.get<std::string>());
  }
  if (*latest != names.back()) {
    throw corrupt("\"latest\" is not the last of \"all\"");
  }
  return names;
}

std::string format_checkpoint_index(const std::vector<std::string>& all) {
  return json{{"latest", all.back()}, {"all", all}}.dump(2) + "\n";
}

}  // namespace vkt::detail
