#version 450
#extension GL_GOOGLE_include_directive : require
// layer_norm_grad.comp with a workgroup of 64 per row: with
// xhat = (x - mean) * rstd and g = dy * gamma,
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),
// the two means by row_tree.glsl's fixed tree.
layout(local_size_x_id = 0) in;  // 64, always

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Gamma { float gamma[]; };
layout(std430, binding = 2) readonly buffer Stats { vec2 stats[]; };
layout(std430, binding = 3) readonly buffer DY { float dy[]; };
layout(std430, binding = 4) writeonly buffer DX { float dx[]; };
#define LAYER_NORM_ROWS
#include "layer_norm.glsl"

void main() {
  uint r = row_index();
  if (r >= rows) return;
  uint base = r * d, lane = gl_LocalInvocationID.x;
  vec2 s = stats[r];
  float sum_g = 0.0, sum_gx = 0.0;
  for (uint k = lane; k < d; k += ROW_LANES) {
    float g = dy[base + k] * gamma[k];
    sum_g += g;
    sum_gx += g * (x[base + k] - s.x) * s.y;
  }
  float mean_g = row_sum(sum_g) / float(d), mean_gx = row_sum(sum_gx) / float(d);
  for (uint k = lane; k < d; k += ROW_LANES) {
    float xhat = (x[base + k] - s.x) * s.y;
    dx[base + k] = s.y * (dy[base + k] * gamma[k] - mean_g - xhat * mean_gx);
  }
}
