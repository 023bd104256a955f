#version 450
// sum = sum + g_0 + g_1 + ... + g_{n-1}, left to right in tower order: add_n
// for a destination that accumulates (gradient accumulation's later
// micro-batches add to the step's sums so far), the same bits on every run.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
#include "index.glsl"

layout(std430, binding = 0) readonly buffer Gathered { vec4 gathered[]; };
layout(std430, binding = 1) buffer Sum { vec4 sum[]; };
layout(push_constant) uniform Params {
  uint vectors;  // vec4s per arena
  uint towers;
  uint stride;   // vec4s from one tower's slice to the next
};

void main() {
  uint i = linear_index();
  if (i >= vectors) return;
  vec4 acc = sum[i];
  for (uint t = 0; t < towers; ++t) acc += gathered[t * stride + i];
  sum[i] = acc;
}
