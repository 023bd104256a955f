#version 450
#extension GL_GOOGLE_include_directive : require
// dense[v, c] = sum of values[j, c] over every j with indices[j] == v, summed in
// increasing j: each invocation owns COLS columns of one output row and scans
// all k indices, so no two invocations write the same element (Vulkan 1.1 has
// no float atomics) and the result does not depend on scheduling. Cost: rows *
// ceil(dim / COLS) * k index comparisons plus k * dim additions. Indices
// outside [0, rows) match no row and are dropped.
layout(local_size_x_id = 0) in;
#include "index.glsl"
layout(constant_id = 1) const uint COLS = 8;

layout(std430, binding = 0) readonly buffer Values { float values[]; };
layout(std430, binding = 1) readonly buffer Indices { int indices[]; };
layout(std430, binding = 2) writeonly buffer Out { float o[]; };
layout(push_constant) uniform Params {
  uint rows;    // V
  uint dim;     // D
  uint k;       // rows of values
  uint blocks;  // ceil(dim / COLS)
};

void main() {
  uint t = linear_index();
  if (t >= rows * blocks) return;
  int v = int(t / blocks);
  uint c0 = (t % blocks) * COLS;
  uint c1 = min(c0 + COLS, dim);
  float acc[COLS];
  for (uint c = 0; c < COLS; ++c) acc[c] = 0.0;
  for (uint j = 0; j < k; ++j) {
    if (indices[j] != v) continue;
    for (uint c = c0; c < c1; ++c) acc[c - c0] += values[j * dim + c];
  }
  for (uint c = c0; c < c1; ++c) o[uint(v) * dim + c] = acc[c - c0];
}
