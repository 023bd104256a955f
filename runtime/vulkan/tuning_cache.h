#pragma once
// What kernels learned about a device by trying (the best tile shapes, ...),
// remembered per device across runs.

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vkt {

/// A per-device store of tuning results: key -> list of numbers, e.g.
/// "matmul_tiled/1024x1024x1024" -> {64, 64, 8}. Backed by a small JSON file in
/// the cache directory named after the device (DeviceCacheKey), or in memory
/// only. Thread-safe. Device::tuning() hands out the one shared by every Device
/// of the process with the same key and cache directory, so towers tune once.
/// A file that is unreadable, malformed, of the wrong shape or another device's
/// is ignored with a log line, never trusted, and rewritten by the next save.
class TuningCache {
 public:
  /// In memory only.
  TuningCache() = default;
  /// Backed by `file`, loaded now; `device` is the DeviceCacheKey stem the file
  /// must name. A missing file is an empty cache.
  TuningCache(std::filesystem::path file, std::string device);
  /// Saves what was stored since the last save (logging, never throwing, on failure).
  ~TuningCache();
  TuningCache(const TuningCache&) = delete;
  TuningCache& operator=(const TuningCache&) = delete;

  /// The values stored under `key`, by this process or an earlier run.
  std::optional<std::vector<std::uint32_t>> find(std::string_view key) const;
  /// Remembers `values` under `key` (replacing what was there). Written to disk
  /// by save() or when the last Device using the cache is destroyed. Throws
  /// vkt::Error for an empty key.
  void store(std::string key, std::vector<std::uint32_t> values);
  /// Writes the file now if anything was stored since the last save, merged
  /// with what other processes wrote meanwhile (this process's values win);
  /// atomically (a temporary file renamed). Does nothing in memory only.
  /// Never throws: a failure is logged and the values stay in memory.
  void save();

  /// The file behind the cache; empty when it is in memory only.
  const std::filesystem::path& file() const { return file_; }

  /// Files larger than this are not read (a tuning file holds a few KiB).
  static constexpr std::uintmax_t kMaxFileBytes = std::uintmax_t{1} << 20;

 private:
  using Entries = std::map<std::string, std::vector<std::uint32_t>, std::less<>>;
  // The file's entries; none, with `why` set, when it is not a valid one.
  Entries read_file(std::string& why) const;

  std::filesystem::path file_;
  std::string device_;
  mutable std::mutex mutex_;
  Entries entries_;
  bool dirty_ = false;  // stored since the last save
};

namespace detail {
/// The TuningCache of device `stem` in `dir` (in memory when there is no dir),
/// shared by every holder in the process while one holds it.
std::shared_ptr<TuningCache> shared_tuning_cache(const std::optional<std::filesystem::path>& dir,
                                                 const std::string& stem);
}  // namespace detail

}  // namespace vkt
