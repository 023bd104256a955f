#version 450
// v[i] = decay * v[i] + (1 - decay) * scale * x[i], written to the variable v
// in place and to the op's output: a moving average (batch norm's moving mean
// and variance; scale n / (n - 1) makes a batch variance unbiased).
#extension GL_GOOGLE_include_directive : require
#include "index.glsl"
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) buffer V { float v[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) writeonly buffer Out { float out_[]; };
layout(push_constant) uniform Params {
  uint n;
  float decay;
  float scale;
};

void main() {
  uint i = linear_index();
  if (i >= n) return;
  float updated = decay * v[i] + (1.0 - decay) * (scale * x[i]);
  v[i] = updated;
  out_[i] = updated;
}
