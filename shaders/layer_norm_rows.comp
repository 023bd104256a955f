#version 450
#extension GL_GOOGLE_include_directive : require
// layer_norm.comp with a workgroup of 64 per row (rows of 32 and more): the
// row's statistics by a fixed tree (layer_norm.glsl, LAYER_NORM_ROWS), then
//   y = (x - mean) * rstd * gamma + beta, each lane every 64th element.
layout(local_size_x_id = 0) in;  // 64, always

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Gamma { float gamma[]; };
layout(std430, binding = 2) readonly buffer Beta { float beta[]; };
layout(std430, binding = 3) writeonly buffer Y { float y[]; };
#define LAYER_NORM_ROWS
#include "layer_norm.glsl"

void main() {
  uint r = row_index();
  if (r >= rows) return;  // the whole workgroup: r is the workgroup's
  uint base = r * d;
  float mean, rstd;
  row_stats(base, mean, rstd);
  for (uint k = gl_LocalInvocationID.x; k < d; k += ROW_LANES)
    y[base + k] = (x[base + k] - mean) * rstd * gamma[k] + beta[k];
}
