#version 450
#extension GL_GOOGLE_include_directive : require
// rms_norm_grad.comp with a workgroup of 64 per row: with xhat = x * rstd and
// g = dy * gamma,
//   dx = rstd * (g - xhat * mean(g * xhat)),
// the mean by row_tree.glsl's fixed tree.
layout(local_size_x_id = 0) in;  // 64, always

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Gamma { float gamma[]; };
layout(std430, binding = 2) readonly buffer Stats { vec2 stats[]; };
layout(std430, binding = 3) readonly buffer DY { float dy[]; };
layout(std430, binding = 4) writeonly buffer DX { float dx[]; };
#define RMS_NORM_ROWS
#include "rms_norm.glsl"

void main() {
  uint r = row_index();
  if (r >= rows) return;
  uint base = r * d, lane = gl_LocalInvocationID.x;
  float rstd = stats[r].y;
  float sum_gx = 0.0;
  for (uint k = lane; k < d; k += ROW_LANES)
    sum_gx += dy[base + k] * gamma[k] * (x[base + k] * rstd);
  float mean_gx = row_sum(sum_gx) / float(d);
  for (uint k = lane; k < d; k += ROW_LANES) {
    float xhat = x[base + k] * rstd;
    dx[base + k] = rstd * (dy[base + k] * gamma[k] - xhat * mean_gx);
  }
}
