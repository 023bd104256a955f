#version 450
// out = g_0 + g_1 + ... + g_{n-1}, summed left to right in tower order so the
// result is the same bit for bit on every run: the towers' gradient arenas,
// gathered one after another in one buffer (slices `stride` vec4s apart).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
#include "index.glsl"

layout(std430, binding = 0) readonly buffer Gathered { vec4 gathered[]; };
layout(std430, binding = 1) writeonly buffer Out { vec4 sum[]; };
layout(push_constant) uniform Params {
  uint vectors;  // vec4s per arena
  uint towers;
  uint stride;   // vec4s from one tower's slice to the next
};

void main() {
  uint i = linear_index();
  if (i >= vectors) return;
  vec4 acc = gathered[i];
  for (uint t = 1; t < towers; ++t) acc += gathered[t * stride + i];
  sum[i] = acc;
}
