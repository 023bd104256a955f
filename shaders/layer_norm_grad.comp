#version 450
#extension GL_GOOGLE_include_directive : require
// Layer normalization backward to x, one invocation per row. With
// xhat = (x - mean) * rstd and g = dy * gamma:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
layout(local_size_x_id = 0) in;
#include "index.glsl"

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Gamma { float gamma[]; };
layout(std430, binding = 2) readonly buffer Stats { vec2 stats[]; };
layout(std430, binding = 3) readonly buffer DY { float dy[]; };
layout(std430, binding = 4) writeonly buffer DX { float dx[]; };
#include "layer_norm.glsl"

void main() {
  uint r = linear_index();
  if (r >= rows) return;
  uint base = r * d;
  vec2 s = stats[r];
  float sum_g = 0.0, sum_gx = 0.0;
  for (uint k = 0; k < d; ++k) {
    float g = dy[base + k] * gamma[k];
    sum_g += g;
    sum_gx += g * (x[base + k] - s.x) * s.y;
  }
  float mean_g = sum_g / float(d), mean_gx = sum_gx / float(d);
  for (uint k = 0; k < d; ++k) {
    float xhat = (x[base + k] - s.x) * s.y;
    dx[base + k] = s.y * (dy[base + k] * gamma[k] - mean_g - xhat * mean_gx);
  }
}
