#version 450
#extension GL_GOOGLE_include_directive : require
// rms_norm.comp with a workgroup of 64 per row (rows of 32 and more): the
// row's mean square by a fixed tree (rms_norm.glsl, RMS_NORM_ROWS), then
//   y = x * rstd * gamma, each lane every 64th element.
layout(local_size_x_id = 0) in;  // 64, always

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Gamma { float gamma[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
#define RMS_NORM_ROWS
#include "rms_norm.glsl"

void main() {
  uint r = row_index();
  if (r >= rows) return;  // the whole workgroup: r is the workgroup's
  uint base = r * d;
  float rstd = row_rstd(base);
  for (uint k = gl_LocalInvocationID.x; k < d; k += ROW_LANES)
    y[base + k] = x[base + k] * rstd * gamma[k];
}
