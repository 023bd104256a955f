#version 450
#extension GL_GOOGLE_include_directive : require
// Copies a block along one axis out of x: both viewed as [outer, inner], output
// element i reads x's row i / out_inner at column offset + i % out_inner. Copies
// 32-bit words, so f32 and i32 tensors alike.
layout(local_size_x_id = 0) in;
#include "index.glsl"

layout(std430, binding = 0) readonly buffer X { uint x[]; };
layout(std430, binding = 1) writeonly buffer Out { uint o[]; };
layout(push_constant) uniform Params {
  uint n;          // output elements
  uint out_inner;  // output elements per outer index
  uint in_inner;   // x elements per outer index
  uint offset;     // first column of the block within a row of x
};

void main() {
  uint i = linear_index();
  if (i >= n) return;
  o[i] = x[(i / out_inner) * in_inner + offset + i % out_inner];
}
