#version 450
#extension GL_GOOGLE_include_directive : require
// permute.comp where the last axis stays last and is a multiple of 4 long
// (every stride is then a multiple of 4 too): an invocation copies one
// 16-byte vector (lavapipe makes every storage-buffer access a loop over its
// lanes, so one access beats four).
layout(local_size_x_id = 0) in;
#include "index.glsl"
#include "permute.glsl"

layout(std430, binding = 0) readonly buffer X {
  uvec4 x[];
};
layout(std430, binding = 1) writeonly buffer Out {
  uvec4 o[];
};
layout(push_constant) uniform Params {
  uint n;  // elements (not vectors)
};

void main() {
  uint v = linear_index();
  if (v * 4u >= n) return;
  o[v] = x[permuted_source(v * 4u) / 4u];
}
