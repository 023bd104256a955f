#include "host_transfer.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "buffer.h"
#include "detail/vk_check.h"
#include "device.h"
#include "error.h"

namespace vkt {
namespace {

// Small transfers (a loss, a metric) share one staging buffer of this size, so
// reads of slightly different sizes do not each grow it.
constexpr std::size_t kMinStagingBytes = 64 * 1024;

}  // namespace

HostTransfer::HostTransfer(Device& device, std::size_t chunk_bytes)
    : device_(&device), chunk_(chunk_bytes) {
  if (chunk_bytes == 0) throw Error("a host transfer needs a staging chunk of at least 1 byte");
  const VkDevice vk = device.vk_device();
  VkCommandPoolCreateInfo pool_info{};
  pool_info.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pool_info.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
  pool_info.queueFamilyIndex = device.queue_family(QueueKind::Transfer);
  VkCommandPool pool = VK_NULL_HANDLE;
  VKT_CHECK(vkCreateCommandPool(vk, &pool_info, nullptr, &pool));
  pool_ = {vk, pool};
  device.count_created(DeviceObject::CommandPool);

  VkCommandBufferAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  alloc.commandPool = pool;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  VKT_CHECK(vkAllocateCommandBuffers(vk, &alloc, &commands_));
  device.count_created(DeviceObject::CommandBuffer);
}

HostTransfer::~HostTransfer() = default;

std::size_t HostTransfer::staging_bytes() const {
  std::lock_guard lock(mutex_);
  return staging_ ? staging_->size() : 0;
}

std::byte* HostTransfer::reserve(std::size_t bytes) {
  const std::size_t needed = std::min(bytes, chunk_);
  if (!staging_ || staging_->size() < needed) {
    // Rounded up so that a few growing transfers do not reallocate each time.
    std::size_t size = std::max(needed, kMinStagingBytes);
    if (size <= (std::size_t{1} << 62)) size = std::bit_ceil(size);
    size = std::min(size, chunk_);
    staging_.reset();  // the old one first: peak memory stays one staging buffer
    staging_ = std::make_unique<Buffer>(*device_, size, BufferKind::Staging);
  }
  return staging_->host().data();
}

void HostTransfer::copy(VkBuffer src, std::size_t src_offset, VkBuffer dst, std::size_t dst_offset,
                        std::size_t bytes) {
  VKT_CHECK(vkResetCommandPool(device_->vk_device(), pool_.get(), 0));
  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  VKT_CHECK(vkBeginCommandBuffer(commands_, &begin));
  // Orders the copy after earlier work on the queue, as a Stream's first
  // barrier does; a dedicated transfer queue has no compute stage to name.
  VkPipelineStageFlags before = VK_PIPELINE_STAGE_TRANSFER_BIT;
  VkMemoryBarrier barrier{};
  barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  barrier.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  if (!device_->has_transfer_queue()) {
    before |= VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
    barrier.srcAccessMask |= VK_ACCESS_SHADER_WRITE_BIT;
  }
  barrier.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  vkCmdPipelineBarrier(commands_, before, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &barrier, 0,
                       nullptr, 0, nullptr);
  const VkBufferCopy region{src_offset, dst_offset, bytes};
  vkCmdCopyBuffer(commands_, src, dst, 1, &region);
  // The copy's writes visible to the host once the ticket completes.
  barrier.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(commands_, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                       &barrier, 0, nullptr, 0, nullptr);
  VKT_CHECK(vkEndCommandBuffer(commands_));
  device_->submit(QueueKind::Transfer, commands_, {}).wait();
}

void HostTransfer::upload(const Buffer& dst, std::size_t offset, std::span<const std::byte> bytes) {
  std::lock_guard lock(mutex_);
  std::byte* staging = reserve(bytes.size());
  for (std::size_t done = 0; done < bytes.size();) {
    const std::size_t n = std::min(staging_->size(), bytes.size() - done);
    std::memcpy(staging, bytes.data() + done, n);
    copy(staging_->vk_buffer(), 0, dst.vk_buffer(), offset + done, n);
    done += n;
  }
}

void HostTransfer::download(const Buffer& src, std::size_t offset, std::span<std::byte> bytes) {
  std::lock_guard lock(mutex_);
  std::byte* staging = reserve(bytes.size());
  for (std::size_t done = 0; done < bytes.size();) {
    const std::size_t n = std::min(staging_->size(), bytes.size() - done);
    copy(src.vk_buffer(), offset + done, staging_->vk_buffer(), 0, n);
    std::memcpy(bytes.data() + done, staging, n);
    done += n;
  }
}

}  // namespace vkt
