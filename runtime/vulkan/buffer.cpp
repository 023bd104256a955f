#include "buffer.h"

#include <fmt/format.h>

#include <array>
#include <cstring>

#include "detail/vk_check.h"
#include "error.h"
#include "host_transfer.h"

namespace vkt {

namespace {

/// The compute and the transfer queue's families.
std::array<std::uint32_t, 2> queue_families(const Device& device) {
  return {device.queue_family(QueueKind::Compute), device.queue_family(QueueKind::Transfer)};
}

/// Both queues touch buffers when the device has a transfer queue; concurrent
/// sharing spares the ownership transfers. `families` must outlive `info`'s use.
void share_between_queues(VkBufferCreateInfo& info, const Device& device,
                          const std::array<std::uint32_t, 2>& families) {
  if (device.has_transfer_queue()) {
    info.sharingMode = VK_SHARING_MODE_CONCURRENT;
    info.queueFamilyIndexCount = 2;
    info.pQueueFamilyIndices = families.data();
  } else {
    info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  }
}

}  // namespace

Buffer::Buffer(Device& device, std::size_t bytes, BufferKind kind)
    : device_(&device), size_(bytes), kind_(kind) {
  const char* what = kind == BufferKind::Staging ? "staging buffer" : "storage buffer";
  if (bytes == 0) {
    throw Error(fmt::format("cannot make a {} of 0 bytes: give a size of at least 1 byte", what));
  }
  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.size = bytes;
  info.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  if (kind == BufferKind::Storage) {
    info.usage |= VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT;
  }
  const std::array<std::uint32_t, 2> families = queue_families(device);
  share_between_queues(info, device, families);
  const std::string description = fmt::format("a {} of {} bytes", what, bytes);
  // Checked before vkCreateBuffer: some drivers fail that call outright for sizes
  // no heap can hold, and the message should say so plainly.
  const std::uint64_t limit = device.info().max_allocation_bytes;
  if (limit != 0 && bytes > limit) {
    VkMemoryRequirements too_big{};
    too_big.size = bytes;
    too_big.memoryTypeBits = ~0u;
    device.allocate(too_big, kind == BufferKind::Staging, description);  // throws
  }
  VkBuffer raw = VK_NULL_HANDLE;
  VKT_CHECK(vkCreateBuffer(device.vk_device(), &info, nullptr, &raw));
  buffer_ = {device.vk_device(), raw};

  VkMemoryRequirements requirements{};
  vkGetBufferMemoryRequirements(device.vk_device(), raw, &requirements);
  allocation_ = device.allocate(requirements, kind == BufferKind::Staging, description);
  const VkResult bound = vkBindBufferMemory(device.vk_device(), raw, allocation_.memory, 0);
  if (bound != VK_SUCCESS) {
    device.free(allocation_);
    detail::check(bound, "vkBindBufferMemory");
  }
}

Buffer::Buffer(Device& device, std::span<std::byte> host_memory)
    : device_(&device), size_(host_memory.size()), kind_(BufferKind::Staging) {
  VkExternalMemoryBufferCreateInfo external{};
  external.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO;
  external.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.pNext = &external;
  info.size = host_memory.size();
  info.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  const std::array<std::uint32_t, 2> families = queue_families(device);
  share_between_queues(info, device, families);
  VkBuffer raw = VK_NULL_HANDLE;
  VKT_CHECK(vkCreateBuffer(device.vk_device(), &info, nullptr, &raw));
  buffer_ = {device.vk_device(), raw};
  VkMemoryRequirements requirements{};
  vkGetBufferMemoryRequirements(device.vk_device(), raw, &requirements);
  allocation_ = device.import_host(host_memory.data(), host_memory.size(), requirements,
                                   fmt::format("host memory of {} bytes", host_memory.size()));
  const VkResult bound = vkBindBufferMemory(device.vk_device(), raw, allocation_.memory, 0);
  if (bound != VK_SUCCESS) {
    device.free(allocation_);
    detail::check(bound, "vkBindBufferMemory");
  }
}

Buffer::~Buffer() {
  release();
}

void Buffer::release() {
  buffer_.reset();
  if (device_ != nullptr) device_->free(allocation_);
}

Buffer::Buffer(Buffer&& other) noexcept
    : device_(other.device_),
      size_(other.size_),
      kind_(other.kind_),
      buffer_(std::move(other.buffer_)),
      allocation_(std::exchange(other.allocation_, {})) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    device_ = other.device_;
    size_ = other.size_;
    kind_ = other.kind_;
    buffer_ = std::move(other.buffer_);
    allocation_ = std::exchange(other.allocation_, {});
  }
  return *this;
}

std::span<std::byte> Buffer::host() {
  if (!mapped()) {
    throw Error(
        "this buffer is not mapped into host memory (a storage buffer on a device with "
        "separate memory, or VKT_FORCE_STAGING=1): use upload()/download()");
  }
  return {static_cast<std::byte*>(allocation_.mapped), size_};
}

std::span<const std::byte> Buffer::host() const {
  return const_cast<Buffer*>(this)->host();
}

void Buffer::check_range(std::size_t offset, std::size_t bytes, const char* what) const {
  if (!buffer_) throw Error(fmt::format("cannot {} an empty (moved-from) buffer", what));
  if (offset > size_ || bytes > size_ - offset) {
    throw Error(fmt::format("cannot {} {} bytes at offset {}: the buffer holds {} bytes", what,
                            bytes, offset, size_));
  }
}

void Buffer::upload(std::span<const std::byte> bytes, std::size_t offset) {
  check_range(offset, bytes.size(), "upload");
  if (bytes.empty()) return;
  if (mapped()) {
    std::memcpy(host().data() + offset, bytes.data(), bytes.size());
    return;
  }
  device_->host_transfer().upload(*this, offset, bytes);
}

void Buffer::download(std::span<std::byte> bytes, std::size_t offset) const {
  check_range(offset, bytes.size(), "download");
  if (bytes.empty()) return;
  if (mapped()) {
    std::memcpy(bytes.data(), host().data() + offset, bytes.size());
    return;
  }
  device_->host_transfer().download(*this, offset, bytes);
}

}  // namespace vkt
