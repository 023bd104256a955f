#version 450
#extension GL_GOOGLE_include_directive : require
// RMS normalization forward (Llama's RMSNorm), one invocation per row:
//   y = x * rstd * gamma, rstd = 1 / sqrt(mean(x^2) + epsilon).
layout(local_size_x_id = 0) in;
#include "index.glsl"

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Gamma { float gamma[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
#include "rms_norm.glsl"

void main() {
  uint r = linear_index();
  if (r >= rows) return;
  uint base = r * d;
  float rstd = row_rstd(base);
  for (uint k = 0; k < d; ++k) y[base + k] = x[base + k] * rstd * gamma[k];
}
