#version 450
#extension GL_GOOGLE_include_directive : require
// RMS normalization backward to x, one invocation per row. With
// xhat = x * rstd and g = dy * gamma:
//   dx = rstd * (g - xhat * mean(g * xhat)).
layout(local_size_x_id = 0) in;
#include "index.glsl"

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Gamma { float gamma[]; };
layout(std430, binding = 2) readonly buffer Stats { vec2 stats[]; };
layout(std430, binding = 3) readonly buffer DY { float dy[]; };
layout(std430, binding = 4) writeonly buffer DX { float dx[]; };
#include "rms_norm.glsl"

void main() {
  uint r = linear_index();
  if (r >= rows) return;
  uint base = r * d;
  float rstd = stats[r].y;
  float sum_gx = 0.0;
  for (uint k = 0; k < d; ++k) sum_gx += dy[base + k] * gamma[k] * (x[base + k] * rstd);
  float mean_gx = sum_gx / float(d);
  for (uint k = 0; k < d; ++k) {
    float xhat = x[base + k] * rstd;
    dx[base + k] = rstd * (dy[base + k] * gamma[k] - xhat * mean_gx);
  }
}
