#version 450
// The half exchange's sum: out = g_0 + g_1 + ... + g_{n-1} (or, INTO, out +
// g_0 + ...), each g_t a tower's gradients packed to TYPE (1 f16, 2 bf16) by
// pack_half.comp, widened exactly and summed in f32 left to right in tower
// order: the same bits on every run. Slices `stride` uvec2s (4 halves) apart.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TYPE = 1;
layout(constant_id = 2) const bool INTO = false;
#include "half.glsl"
#include "index.glsl"

layout(std430, binding = 0) readonly buffer Gathered { uvec2 gathered[]; };
layout(std430, binding = 1) buffer Sum { vec4 sum[]; };
layout(push_constant) uniform Params {
  uint vectors;  // vec4s of the sum
  uint towers;
  uint stride;   // uvec2s from one tower's slice to the next
};

float widen(uint h) { return uintBitsToFloat(to_f32_bits(TYPE, h & 0xffffu)); }
vec4 widen4(uvec2 w) { return vec4(widen(w.x), widen(w.x >> 16), widen(w.y), widen(w.y >> 16)); }

void main() {
  uint i = linear_index();
  if (i >= vectors) return;
  vec4 acc = INTO ? sum[i] + widen4(gathered[i]) : widen4(gathered[i]);
  for (uint t = 1u; t < towers; ++t) acc += widen4(gathered[t * stride + i]);
  sum[i] = acc;
}
