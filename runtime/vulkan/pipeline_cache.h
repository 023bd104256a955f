#pragma once
// The Device's VkPipelineCache, loaded from and saved to the cache directory.

#include <vulkan/vulkan_core.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache_dir.h"

namespace vkt {

/// Why `data` must not be handed to vkCreatePipelineCache on the device `key`
/// names: too short, a header (VkPipelineCacheHeaderVersionOne) of another
/// version, size, vendor, device or pipelineCacheUUID. Empty when it may.
/// Drivers are meant to check this themselves; not every one does it well, and
/// a file on disk is anyone's to corrupt.
std::string pipeline_cache_rejection(std::span<const std::byte> data, const DeviceCacheKey& key);

/// One VkPipelineCache for a VkDevice. With a cache directory, made from the
/// file named after the device's DeviceCacheKey when that file is valid (a
/// missing one is a cold start; a corrupt, truncated, oversized or foreign one
/// is ignored with a log line), and written back by save(). The file is a
/// 24-byte header ("VKTPIPE1", the data's size and crc32) and the driver's data.
class PipelineCache {
 public:
  PipelineCache(VkDevice device, const DeviceCacheKey& key,
                const std::optional<std::filesystem::path>& dir);
  ~PipelineCache();
  PipelineCache(const PipelineCache&) = delete;
  PipelineCache& operator=(const PipelineCache&) = delete;

  VkPipelineCache handle() const { return cache_; }
  /// The file behind the cache; empty without a cache directory.
  const std::filesystem::path& file() const { return file_; }
  /// How many bytes of cache data the Device started with (0: cold).
  std::size_t loaded_bytes() const { return loaded_bytes_; }
  /// Writes the cache's data, merged with what the file holds now (other
  /// Devices' pipelines), to the file, atomically (a temporary file renamed),
  /// unless that is what the file holds already. Call it between steps,
  /// never while pipelines are being made elsewhere. Never throws: a failure is
  /// logged, and the next run starts colder.
  void save();

  /// Files larger than this are not read: a pipeline cache of every vktower
  /// kernel is a few MiB at most on real drivers.
  static constexpr std::uintmax_t kMaxFileBytes = std::uintmax_t{64} << 20;

 private:
  // The file's cache data when it is valid; empty, with `why` set, when not.
  std::vector<std::byte> read_file(std::string& why) const;
  VkPipelineCache make_cache(std::span<const std::byte> data) const;

  VkDevice device_;
  DeviceCacheKey key_;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  std::filesystem::path file_;
  std::size_t loaded_bytes_ = 0;
  std::mutex mutex_;
  std::vector<std::byte> saved_;  // what the file holds as far as we know
};

}  // namespace vkt
