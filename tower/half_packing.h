#pragma once
// f32 values packed to f16 or bf16 words and back on a device
// (shaders/pack_half.comp, unpack_half.comp): what the half gradient
// exchange and the half weight copies send instead of f32.

#include <cstddef>

#include "../runtime/graph/shape.h"
#include "../runtime/vulkan/buffer.h"

namespace vkt {

class Stream;

/// Bytes of `values` f32 values packed two to a 32-bit word.
inline std::size_t packed_bytes(std::size_t values) {
  return (values + 1) / 2 * 4;
}

/// Records, on `stream` (of `f32`'s Device), the f32 values of `f32` rounded
/// to `half` (nearest-even) into packed_bytes() of `words`. `f32` may start
/// at any 4-byte offset: the kernel binds its buffer from an aligned offset
/// below and reads from an index.
void record_pack_half(Stream& stream, BufferRange f32, BufferRange words, DType half);
/// Records the reverse: `words` widened (exactly) into the f32 values of
/// `f32`, and nothing else of its buffer written.
void record_unpack_half(Stream& stream, BufferRange words, BufferRange f32, DType half);

}  // namespace vkt
