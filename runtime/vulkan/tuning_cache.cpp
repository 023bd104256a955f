#include "tuning_cache.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <iterator>
#include <limits>
#include <system_error>

#include "../io/atomic_file.h"
#include "detail/log.h"
#include "error.h"

namespace vkt {
namespace {

using nlohmann::json;

constexpr const char* kFormat = "vktower-tuning-1";

// The entries of a tuning file's text, or why it is not one of this device's.
std::string parse(const std::string& text, const std::string& device,
                  std::map<std::string, std::vector<std::uint32_t>, std::less<>>& out) {
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return "it is not JSON";
  if (!doc.is_object()) return "it is not a JSON object";
  const auto format = doc.find("format");
  if (format == doc.end() || !format->is_string() || format->get<std::string>() != kFormat) {
    return fmt::format("its \"format\" is not \"{}\"", kFormat);
  }
  const auto owner = doc.find("device");
  if (owner == doc.end() || !owner->is_string()) return "it names no \"device\"";
  if (owner->get<std::string>() != device) {
    return fmt::format("it belongs to device '{}', not this one ('{}')", owner->get<std::string>(),
                       device);
  }
  const auto entries = doc.find("entries");
  if (entries == doc.end() || !entries->is_object()) return "its \"entries\" is not an object";
  for (const auto& [key, values] : entries->items()) {
    if (key.empty()) return "it has an empty key";
    if (!values.is_array()) return fmt::format("entry '{}' is not an array", key);
    std::vector<std::uint32_t> numbers;
    for (const json& v : values) {
      if (!v.is_number_unsigned() ||
          v.get<std::uint64_t>() > std::numeric_limits<std::uint32_t>::max()) {
        return fmt::format("entry '{}' holds {}, not a 32-bit unsigned integer", key, v.dump());
      }
      numbers.push_back(static_cast<std::uint32_t>(v.get<std::uint64_t>()));
    }
    out[key] = std::move(numbers);
  }
  return {};
}

}  // namespace

TuningCache::TuningCache(std::filesystem::path file, std::string device)
    : file_(std::move(file)), device_(std::move(device)) {
  std::string why;
  entries_ = read_file(why);
  if (!why.empty()) {
    detail::log().warn("ignoring the tuning cache '{}': {}; it will be rewritten", file_.string(),
                       why);
  }
}

TuningCache::~TuningCache() {
  save();
}

TuningCache::Entries TuningCache::read_file(std::string& why) const {
  Entries entries;
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(file_, ec);
  if (ec) return entries;  // no file yet: nothing tuned on this device
  if (size > kMaxFileBytes) {
    why = fmt::format("{} bytes is more than a tuning file holds ({})", size, kMaxFileBytes);
    return entries;
  }
  std::ifstream in(file_, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in && !in.eof()) {
    why = "it cannot be read";
    return entries;
  }
  why = parse(text, device_, entries);
  return why.empty() ? entries : Entries{};
}

std::optional<std::vector<std::uint32_t>> TuningCache::find(std::string_view key) const {
  std::lock_guard lock(mutex_);
  const auto found = entries_.find(key);
  if (found == entries_.end()) return std::nullopt;
  return found->second;
}

void TuningCache::store(std::string key, std::vector<std::uint32_t> values) {
  if (key.empty()) throw Error("TuningCache::store: the key is empty; name what was tuned");
  std::lock_guard lock(mutex_);
  entries_[std::move(key)] = std::move(values);
  dirty_ = true;
}

void TuningCache::save() {
  std::lock_guard lock(mutex_);
  if (!dirty_ || file_.empty()) return;
  // Another process may have tuned other keys since we read the file: keep them.
  std::string why;  // a bad file was reported when it was loaded; now it is replaced
  Entries merged = read_file(why);
  for (const auto& [key, values] : entries_) merged[key] = values;
  json entries = json::object();
  for (const auto& [key, values] : merged) entries[key] = values;
  const std::string text =
      json{{"format", kFormat}, {"device", device_}, {"entries", entries}}.dump(1) + "\n";
  try {
    write_file_atomically(file_.string(), text);
    entries_ = std::move(merged);
    dirty_ = false;
  } catch (const std::exception& e) {
    detail::log().warn("the tuning cache stays in memory: {}", e.what());
  }
}

std::shared_ptr<TuningCache> detail::shared_tuning_cache(
    const std::optional<std::filesystem::path>& dir, const std::string& stem) {
  // Towers are Devices on one physical device, made one after another: they
  // share one cache, so what tower 0 tuned tower 1 finds.
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<TuningCache>> caches;
  const bool on_disk = dir && !dir->empty();
  const std::filesystem::path file =
      on_disk ? *dir / ("tuning-" + stem + ".json") : std::filesystem::path();
  const std::string id = on_disk ? file.string() : "memory:" + stem;
  std::lock_guard lock(mutex);
  std::erase_if(caches, [](const auto& entry) { return entry.second.expired(); });
  if (auto held = caches[id].lock()) return held;
  auto made = on_disk ? std::make_shared<TuningCache>(file, stem) : std::make_shared<TuningCache>();
  caches[id] = made;
  return made;
}

}  // namespace vkt
