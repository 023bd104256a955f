#include "half_packing.h"

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "../runtime/vulkan/device.h"
#include "../runtime/vulkan/kernel.h"
#include "../runtime/vulkan/stream.h"

namespace vkt {
namespace {

struct Push {
  std::uint32_t count, first;
};

/// `r` bound from the device's storage alignment at or below its offset,
/// and the index of its first f32 value in that binding.
std::pair<BufferRange, std::uint32_t> aligned_below(const BufferRange& r) {
  const std::size_t align =
      std::max<std::size_t>(4, r.buffer->device().limits().minStorageBufferOffsetAlignment);
  const std::size_t from = r.offset / align * align;
  return {BufferRange(*r.buffer, from, r.offset + r.size() - from),
          static_cast<std::uint32_t>((r.offset - from) / 4)};
}

void record(Stream& stream, const char* shader, BufferRange a, BufferRange b, DType half,
            std::uint32_t count, std::uint32_t first, std::size_t invocations) {
  Device& device = stream.device();
  const Kernel& kernel =
      device.kernel({.shader = shader,
                     .local_size = {256, 1, 1},
                     .constants = {SpecConstant::u32(1, half == DType::F16 ? 1u : 2u)}});
  const Push push{count, first};
  const std::vector<BufferRange> bindings{a, b};
  stream.dispatch(kernel, bindings, std::as_bytes(std::span(&push, 1)),
                  Stream::linear_groups(kernel, invocations));
}

}  // namespace

void record_pack_half(Stream& stream, BufferRange f32, BufferRange words, DType half) {
  const std::size_t count = f32.size() / 4;
  const auto [from, first] = aligned_below(f32);
  record(stream, "pack_half", from, BufferRange(*words.buffer, words.offset, packed_bytes(count)),
         half, static_cast<std::uint32_t>(count), first, (count + 1) / 2);
}

void record_unpack_half(Stream& stream, BufferRange words, BufferRange f32, DType half) {
  const std::size_t count = f32.size() / 4;
  const auto [to, first] = aligned_below(f32);
  record(stream, "unpack_half", BufferRange(*words.buffer, words.offset, packed_bytes(count)), to,
         half, static_cast<std::uint32_t>(count), first, count);
}

}  // namespace vkt
