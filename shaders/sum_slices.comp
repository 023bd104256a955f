#version 450
// The split-K products' last step (matmul_tiled.glsl's SLICES): out[i] is the
// sum of the slices' partial sums p[s * n + i], taken in slice order, so the
// result has the same bits every run whatever the device's scheduling.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
#include "index.glsl"

layout(std430, binding = 0) readonly buffer P { float p[]; };
layout(std430, binding = 1) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Params {
  uint n;       // elements of the output
  uint slices;  // partial sums per element
};

void main() {
  uint i = linear_index();
  if (i >= n) return;
  float v = p[i];
  for (uint s = 1u; s < slices; ++s) v += p[s * n + i];
  o[i] = v;
}
