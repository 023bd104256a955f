#version 450
#extension GL_GOOGLE_include_directive : require
// out = x converted from type FROM to type TO (0 f32, 1 f16, 2 bf16): bits in,
// bits out (half.glsl). Half tensors are stored two to a 32-bit word, so an
// invocation converts elements 2i and 2i + 1 and writes whole words: no two
// invocations share a word. An odd count leaves the last word's high half 0.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint FROM = 0;
layout(constant_id = 2) const uint TO = 1;
#include "index.glsl"
#include "half.glsl"

layout(std430, binding = 0) readonly buffer X { uint x[]; };
layout(std430, binding = 1) writeonly buffer Out { uint o[]; };
layout(push_constant) uniform Params {
  uint n;  // elements
};

void main() {
  uint pair = linear_index();
  uint first = pair * 2u;
  if (first >= n) return;
  bool second = first + 1u < n;
  // Both elements as f32 bits.
  uint a, b;
  if (FROM == 0u) {
    a = x[first];
    b = second ? x[first + 1u] : 0u;
  } else {
    uint word = x[pair];
    a = to_f32_bits(FROM, word & 0xffffu);
    b = to_f32_bits(FROM, word >> 16);
  }
  if (TO == 0u) {
    o[first] = a;
    if (second) o[first + 1u] = b;
  } else {
    uint hi = second ? from_f32_bits(TO, b) : 0u;
    o[pair] = from_f32_bits(TO, a) | (hi << 16);
  }
}
