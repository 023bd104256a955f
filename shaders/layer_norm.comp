#version 450
#extension GL_GOOGLE_include_directive : require
// Layer normalization forward, fused: one invocation per row computes the
// row's mean and 1/sqrt(var + epsilon) and writes
//   y = (x - mean) * rstd * gamma + beta.
layout(local_size_x_id = 0) in;
#include "index.glsl"

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Gamma { float gamma[]; };
layout(std430, binding = 2) readonly buffer Beta { float beta[]; };
layout(std430, binding = 3) writeonly buffer Y { float y[]; };
#include "layer_norm.glsl"

void main() {
  uint r = linear_index();
  if (r >= rows) return;
  uint base = r * d;
  float mean, rstd;
  row_stats(base, mean, rstd);
  for (uint k = 0; k < d; ++k) y[base + k] = (x[base + k] - mean) * rstd * gamma[k] + beta[k];
}
