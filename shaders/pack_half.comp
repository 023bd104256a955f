#version 450
// A tower's f32 gradients packed to the half exchange's type (TYPE 1 f16,
// 2 bf16; half.glsl: nearest-even, the same bits on every device) before they
// travel to the consolidation device: two halves a word, the first in the low
// bits; an odd count's last word has a zero high half.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TYPE = 1;
#include "half.glsl"
#include "index.glsl"

layout(std430, binding = 0) readonly buffer Src { uint src[]; };  // f32 bits
layout(std430, binding = 1) writeonly buffer Dst { uint dst[]; };
layout(push_constant) uniform Params {
  uint count;  // f32 values
  uint first;  // the first one's index in src (the binding starts aligned below it)
};

void main() {
  uint i = linear_index();
  if (2u * i >= count) return;
  uint lo = from_f32_bits(TYPE, src[first + 2u * i]);
  uint hi = 2u * i + 1u < count ? from_f32_bits(TYPE, src[first + 2u * i + 1u]) : 0u;
  dst[i] = lo | (hi << 16);
}
