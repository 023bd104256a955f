#version 450
#extension GL_GOOGLE_include_directive : require
// Each row's (mean, 1/sqrt(var + epsilon)) for the layer-norm backward
// kernels, computed as layer_norm.comp does, so both see the same numbers.
layout(local_size_x_id = 0) in;
#include "index.glsl"

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Stats { vec2 stats[]; };
#include "layer_norm.glsl"

void main() {
  uint r = linear_index();
  if (r >= rows) return;
  float mean, rstd;
  row_stats(r * d, mean, rstd);
  stats[r] = vec2(mean, rstd);
}
