#pragma once
// Device memory: storage buffers for kernels and host-visible staging buffers.

#include <vulkan/vulkan_core.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "detail/handle.h"
#include "device.h"

namespace vkt {

/// Storage: device-local, bound to kernels, copied to and from; mapped only where
/// the device's memory is host-visible (Device::maps_storage()).
/// Staging: host-visible, coherent and persistently mapped; the host side of copies.
enum class BufferKind { Storage, Staging };

/// A byte range of a buffer, as kernels and copies take them. A Buffer converts
/// to its whole range.
struct BufferRange;

/// A move-only buffer with its own memory. Must not outlive its Device, and must
/// not be destroyed while submitted work that uses it is running.
///
///   vkt::Buffer x(device, n * sizeof(float));
///   x.upload(std::span<const float>(host));
///   std::vector<float> back = x.download<float>();
class Buffer {
 public:
  Buffer() = default;
  /// Throws vkt::Error when `bytes` is 0 or more than the device can allocate.
  Buffer(Device& device, std::size_t bytes, BufferKind kind = BufferKind::Storage);
  /// A staging buffer over host memory the caller owns, imported into `device`
  /// (Device::host_import_alignment() must be non-zero, and the memory's address
  /// and size multiples of it). Several Devices may import the same memory; it
  /// must outlive every buffer over it.
  Buffer(Device& device, std::span<std::byte> host_memory);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  std::size_t size() const { return size_; }
  BufferKind kind() const { return kind_; }
  Device& device() const { return *device_; }
  explicit operator bool() const { return static_cast<bool>(buffer_); }

  /// The host view of a mapped buffer (staging, or storage where maps_storage()).
  /// Throws vkt::Error for an unmapped one: use upload()/download() instead.
  bool mapped() const { return allocation_.mapped != nullptr; }
  std::span<std::byte> host();
  std::span<const std::byte> host() const;

  /// Host -> buffer at `offset`, and back. Synchronous: a memcpy where the buffer
  /// is mapped, otherwise copy commands through the Device's reused staging
  /// buffer (HostTransfer), so repeated transfers allocate nothing. Call them
  /// only when no submitted work is writing the buffer.
  void upload(std::span<const std::byte> bytes, std::size_t offset = 0);
  void download(std::span<std::byte> bytes, std::size_t offset = 0) const;

  template <typename T>
  void upload(std::span<const T> values, std::size_t offset = 0) {
    upload(std::as_bytes(values), offset);
  }
  template <typename T>
  void upload(const std::vector<T>& values, std::size_t offset = 0) {
    upload(std::span<const T>(values), offset);
  }
  template <typename T>
  std::vector<T> download() const {
    std::vector<T> values(size_ / sizeof(T));
    download(std::as_writable_bytes(std::span<T>(values)));
    return values;
  }

  VkBuffer vk_buffer() const { return buffer_.get(); }

 private:
  void check_range(std::size_t offset, std::size_t bytes, const char* what) const;
  void release();

  Device* device_ = nullptr;
  std::size_t size_ = 0;
  BufferKind kind_ = BufferKind::Storage;
  detail::DeviceHandle<VkBuffer, vkDestroyBuffer> buffer_;
  Device::Allocation allocation_;
};

struct BufferRange {
  static constexpr std::size_t kWhole = ~std::size_t{0};

  const Buffer* buffer = nullptr;
  std::size_t offset = 0;
  std::size_t bytes = kWhole;

  BufferRange() = default;
  BufferRange(const Buffer& whole) : buffer(&whole) {}  // NOLINT: implicit on purpose
  BufferRange(const Buffer& b, std::size_t offset_bytes, std::size_t size_bytes)
      : buffer(&b), offset(offset_bytes), bytes(size_bytes) {}

  std::size_t size() const { return bytes == kWhole ? buffer->size() - offset : bytes; }
};

}  // namespace vkt
