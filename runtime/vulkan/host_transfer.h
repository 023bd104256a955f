#pragma once
// Host <-> device copies for unmapped buffers, through one reused staging buffer.

#include <vulkan/vulkan_core.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <span>

#include "detail/handle.h"

namespace vkt {

class Buffer;
class Device;

/// A Device's path for host transfers to and from buffers that are not mapped
/// (a discrete GPU's storage, or VKT_FORCE_STAGING=1): one staging buffer, grown
/// only when a larger transfer comes and never past the chunk size (a larger
/// transfer goes through in chunks, so a huge download does not double the
/// memory), and one command pool and command buffer re-recorded for every copy.
/// Once it has seen the largest transfer of a step, a step allocates nothing.
/// Transfers are synchronous and serialized by a mutex, so several threads may
/// use it. Device::host_transfer() makes it on first use; Buffer::upload and
/// Buffer::download go through it.
class HostTransfer {
 public:
  /// `chunk_bytes` (at least 1) bounds the staging buffer.
  HostTransfer(Device& device, std::size_t chunk_bytes);
  ~HostTransfer();
  HostTransfer(const HostTransfer&) = delete;
  HostTransfer& operator=(const HostTransfer&) = delete;

  /// Copies `bytes` into `dst` at `offset` and returns when the device holds
  /// them. The range must lie inside `dst` (Buffer checks it), and no submitted
  /// work may be using that range.
  void upload(const Buffer& dst, std::size_t offset, std::span<const std::byte> bytes);
  /// Copies `src` from `offset` into `bytes`; the same rules.
  void download(const Buffer& src, std::size_t offset, std::span<std::byte> bytes);

  /// The staging buffer's size now (0 before the first transfer).
  std::size_t staging_bytes() const;

 private:
  /// A staging buffer of at least min(bytes, chunk), grown if needed.
  std::byte* reserve(std::size_t bytes);
  /// Records one copy into the reused command buffer, submits it on the
  /// transfer queue and waits.
  void copy(VkBuffer src, std::size_t src_offset, VkBuffer dst, std::size_t dst_offset,
            std::size_t bytes);

  Device* device_;
  std::size_t chunk_;
  mutable std::mutex mutex_;
  std::unique_ptr<Buffer> staging_;
  detail::DeviceHandle<VkCommandPool, vkDestroyCommandPool> pool_;
  VkCommandBuffer commands_ = VK_NULL_HANDLE;  // freed with pool_
};

}  // namespace vkt
