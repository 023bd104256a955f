#version 450
#extension GL_GOOGLE_include_directive : require
// rms_norm_stats.comp for the rows rms_norm_rows.comp normalizes, computed as
// it does (the same tree), so the backward sees the forward's numbers.
layout(local_size_x_id = 0) in;  // 64, always

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Stats { vec2 stats[]; };
#define RMS_NORM_ROWS
#include "rms_norm.glsl"

void main() {
  uint r = row_index();
  if (r >= rows) return;
  float rstd = row_rstd(r * d);
  if (gl_LocalInvocationID.x == 0u) stats[r] = vec2(0.0, rstd);
}
