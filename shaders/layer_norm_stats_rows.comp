#version 450
#extension GL_GOOGLE_include_directive : require
// layer_norm_stats.comp for the rows layer_norm_rows.comp normalizes, computed
// as it does (the same tree), so the backward sees the forward's numbers.
layout(local_size_x_id = 0) in;  // 64, always

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Stats { vec2 stats[]; };
#define LAYER_NORM_ROWS
#include "layer_norm.glsl"

void main() {
  uint r = row_index();
  if (r >= rows) return;
  float mean, rstd;
  row_stats(r * d, mean, rstd);
  if (gl_LocalInvocationID.x == 0u) stats[r] = vec2(mean, rstd);
}
