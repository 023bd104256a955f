#include "pipeline_cache.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <system_error>

#include "../io/atomic_file.h"
#include "detail/log.h"
#include "detail/vk_check.h"

namespace vkt {
namespace {

// The file: this header, then the driver's cache data as vkGetPipelineCacheData
// gave it. The checksum catches what the driver's own header check cannot: a
// body cut short or changed on disk.
struct FileHeader {
  char magic[8] = {'V', 'K', 'T', 'P', 'I', 'P', 'E', '1'};
  std::uint64_t data_bytes = 0;
  std::uint32_t data_crc32 = 0;
  std::uint32_t reserved = 0;
};
static_assert(sizeof(FileHeader) == 24);

std::uint32_t crc32_of(std::span<const std::byte> data) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib takes a uInt length: feed it in pieces below 4 GiB (files are far smaller).
  for (std::size_t at = 0; at < data.size();) {
    const std::size_t n = std::min<std::size_t>(data.size() - at, std::size_t{1} << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data.data() + at), static_cast<uInt>(n));
    at += n;
  }
  return static_cast<std::uint32_t>(crc);
}

std::string hex(std::span<const std::uint8_t> bytes);

// Why a file's bytes are not a valid cache of this device, or empty.
std::string file_rejection(std::span<const std::byte> bytes, const DeviceCacheKey& key) {
  FileHeader header;
  const FileHeader expected;
  if (bytes.size() < sizeof(header)) return fmt::format("{} bytes is too short", bytes.size());
  std::memcpy(&header, bytes.data(), sizeof(header));
  if (std::memcmp(header.magic, expected.magic, sizeof(header.magic)) != 0) {
    return "it is not a vktower pipeline cache file";
  }
  const std::span<const std::byte> data = bytes.subspan(sizeof(header));
  if (header.data_bytes != data.size()) {
    return fmt::format("it should hold {} bytes of cache data, not {} (truncated?)",
                       header.data_bytes, data.size());
  }
  if (crc32_of(data) != header.data_crc32) return "its checksum does not match its data";
  return pipeline_cache_rejection(data, key);
}

std::string hex(std::span<const std::uint8_t> bytes) {
  std::string out;
  for (const std::uint8_t b : bytes) out += fmt::format("{:02x}", b);
  return out;
}

}  // namespace

std::string pipeline_cache_rejection(std::span<const std::byte> data, const DeviceCacheKey& key) {
  VkPipelineCacheHeaderVersionOne header{};
  // The header is five packed fields (Vulkan spec): 4 + 4 + 4 + 4 + 16 bytes.
  constexpr std::size_t kHeaderBytes = 32;
  static_assert(sizeof(header) == kHeaderBytes);
  if (data.size() < kHeaderBytes) {
    return fmt::format("{} bytes is shorter than a pipeline cache header ({})", data.size(),
                       kHeaderBytes);
  }
  std::memcpy(&header, data.data(), kHeaderBytes);
  if (header.headerVersion != VK_PIPELINE_CACHE_HEADER_VERSION_ONE) {
    return fmt::format("header version {}, not {}",
                       static_cast<std::uint32_t>(header.headerVersion),
                       static_cast<std::uint32_t>(VK_PIPELINE_CACHE_HEADER_VERSION_ONE));
  }
  if (header.headerSize < kHeaderBytes || header.headerSize > data.size()) {
    return fmt::format("a header size of {} in {} bytes", header.headerSize, data.size());
  }
  if (header.vendorID != key.vendor_id || header.deviceID != key.device_id) {
    return fmt::format("made for vendor {:04x} device {:04x}, not {:04x} {:04x}", header.vendorID,
                       header.deviceID, key.vendor_id, key.device_id);
  }
  if (!std::equal(key.pipeline_cache_uuid.begin(), key.pipeline_cache_uuid.end(),
                  header.pipelineCacheUUID)) {
    return fmt::format("pipeline cache UUID {}, not the driver's {}", hex(header.pipelineCacheUUID),
                       hex(key.pipeline_cache_uuid));
  }
  return {};
}

PipelineCache::PipelineCache(VkDevice device, const DeviceCacheKey& key,
                             const std::optional<std::filesystem::path>& dir)
    : device_(device), key_(key) {
  if (dir && !dir->empty()) file_ = *dir / ("pipelines-" + key.stem() + ".bin");
  std::string why;
  std::vector<std::byte> data = read_file(why);
  if (!why.empty()) {
    detail::log().warn("ignoring the pipeline cache '{}': {}; starting cold, it will be rewritten",
                       file_.string(), why);
  }
  cache_ = make_cache(data);
  loaded_bytes_ = data.size();
  saved_ = std::move(data);
}

PipelineCache::~PipelineCache() {
  vkDestroyPipelineCache(device_, cache_, nullptr);
}

VkPipelineCache PipelineCache::make_cache(std::span<const std::byte> data) const {
  VkPipelineCacheCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO;
  info.initialDataSize = data.size();
  info.pInitialData = data.empty() ? nullptr : data.data();
  VkPipelineCache cache = VK_NULL_HANDLE;
  VKT_CHECK(vkCreatePipelineCache(device_, &info, nullptr, &cache));
  return cache;
}

std::vector<std::byte> PipelineCache::read_file(std::string& why) const {
  std::error_code ec;
  const std::uintmax_t size = file_.empty() ? 0 : std::filesystem::file_size(file_, ec);
  if (file_.empty() || ec) return {};  // no file yet: a cold start
  if (size > kMaxFileBytes) {
    why =
        fmt::format("{} bytes is more than the {} a pipeline cache may take", size, kMaxFileBytes);
    return {};
  }
  std::vector<std::byte> bytes(static_cast<std::size_t>(size));
  std::ifstream in(file_, std::ios::binary);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!in || in.gcount() != static_cast<std::streamsize>(bytes.size())) {
    why = "it cannot be read whole";
    return {};
  }
  why = file_rejection(bytes, key_);
  if (!why.empty()) return {};
  return {bytes.begin() + sizeof(FileHeader), bytes.end()};
}

void PipelineCache::save() {
  if (file_.empty()) return;
  std::lock_guard lock(mutex_);
  try {
    // Other Devices (towers, an evaluation model, other processes) may have
    // saved pipelines this one never made: merge them in, so the file keeps them.
    std::string why;
    const std::vector<std::byte> on_disk = read_file(why);
    if (!on_disk.empty() && on_disk != saved_) {
      const VkPipelineCache theirs = make_cache(on_disk);
      const VkResult merged = vkMergePipelineCaches(device_, cache_, 1, &theirs);
      vkDestroyPipelineCache(device_, theirs, nullptr);
      VKT_CHECK(merged);
    }
    std::size_t size = 0;
    VKT_CHECK(vkGetPipelineCacheData(device_, cache_, &size, nullptr));
    std::vector<std::byte> data(size);
    // VK_INCOMPLETE (not an error to VKT_CHECK) if the cache grew between the
    // calls: what fits is then a valid, smaller cache (the spec says so).
    VKT_CHECK(vkGetPipelineCacheData(device_, cache_, &size, data.data()));
    data.resize(size);
    if (data == on_disk || pipeline_cache_rejection(data, key_) != "") return;
    FileHeader header;
    header.data_bytes = data.size();
    header.data_crc32 = crc32_of(data);
    std::vector<char> file(sizeof(header) + data.size());
    std::memcpy(file.data(), &header, sizeof(header));
    std::memcpy(file.data() + sizeof(header), data.data(), data.size());
    write_file_atomically(file_.string(), file);
    detail::log().debug("saved {} bytes of pipeline cache to '{}'", data.size(), file_.string());
    saved_ = std::move(data);
  } catch (const std::exception& e) {
    detail::log().warn("the pipeline cache was not saved: {}", e.what());
  }
}

}  // namespace vkt
