#version 450
// The half weight copies' arrival on a tower: `count` values packed two a
// word by pack_half.comp (TYPE 1 f16, 2 bf16), widened exactly into an f32
// arena from index `first` (the binding starts aligned below it). Writes
// those values only: the arena's neighbours keep theirs.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TYPE = 1;
#include "half.glsl"
#include "index.glsl"

layout(std430, binding = 0) readonly buffer Src { uint src[]; };
layout(std430, binding = 1) buffer Dst { uint dst[]; };  // f32 bits
layout(push_constant) uniform Params {
  uint count;
  uint first;
};

void main() {
  uint i = linear_index();
  if (i >= count) return;
  uint word = src[i / 2u];
  dst[first + i] = to_f32_bits(TYPE, (i % 2u == 0u ? word : word >> 16) & 0xffffu);
}
