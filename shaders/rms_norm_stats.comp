#version 450
#extension GL_GOOGLE_include_directive : require
// Each row's (0, rstd) for the RMS-norm backward kernels, computed as
// rms_norm.comp does; laid out as layer_norm_stats.comp's (mean, rstd) with a
// mean of 0, so layer_norm_param_grad.comp gives the gradient to gamma.
layout(local_size_x_id = 0) in;
#include "index.glsl"

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Stats { vec2 stats[]; };
#include "rms_norm.glsl"

void main() {
  uint r = linear_index();
  if (r >= rows) return;
  stats[r] = vec2(0.0, row_rstd(r * d));
}
