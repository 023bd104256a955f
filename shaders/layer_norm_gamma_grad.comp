#version 450
#extension GL_GOOGLE_include_directive : require
// Layer normalization backward to gamma: one invocation per column k sums
// dy * xhat over the rows in row order (no atomics: the same bits every run).
layout(local_size_x_id = 0) in;
#include "index.glsl"

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Stats { vec2 stats[]; };
layout(std430, binding = 2) readonly buffer DY { float dy[]; };
layout(std430, binding = 3) writeonly buffer DGamma { float dgamma[]; };
#include "layer_norm.glsl"

void main() {
  uint k = linear_index();
  if (k >= d) return;
  float sum = 0.0;
  for (uint r = 0; r < rows; ++r) {
    vec2 s = stats[r];
    sum += dy[r * d + k] * (x[r * d + k] - s.x) * s.y;
  }
  dgamma[k] = sum;
}
