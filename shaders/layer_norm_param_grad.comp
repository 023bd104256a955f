#version 450
#extension GL_GOOGLE_include_directive : require
// Layer normalization backward to gamma (OP 0: dy * xhat) or beta (OP 1: dy),
// first stage: invocation (b, k) sums its term over row block b (`block` rows)
// of column k, in row order, into partial[b, k]; the op then sums the blocks in
// order (reduce.comp). Two fixed-order stages instead of one invocation per
// column over every row: a column-only grid leaves most of the device idle
// when the rows are many and the columns few (layer norm over channels).
layout(local_size_x_id = 0) in;
#include "index.glsl"
layout(constant_id = 1) const uint OP = 0;

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Stats { vec2 stats[]; };
layout(std430, binding = 2) readonly buffer DY { float dy[]; };
layout(std430, binding = 3) writeonly buffer Partial { float partial[]; };
#include "layer_norm.glsl"

void main() {
  uint i = linear_index();
  // Written so that nothing overflows for rows near 2^32.
  uint blocks = rows / block + (rows % block != 0u ? 1u : 0u);
  if (i >= blocks * d) return;
  uint k = i % d;
  uint first = (i / d) * block;
  uint end = first + min(block, rows - first);
  float sum = 0.0;
  for (uint r = first; r < end; ++r) {
    float g = dy[r * d + k];
    if (OP == 0) {
      vec2 s = stats[r];
      g *= (x[r * d + k] - s.x) * s.y;
    }
    sum += g;
  }
  partial[i] = sum;
}
