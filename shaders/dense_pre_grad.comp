#version 450
// A fused dense layer's dpre = dy * act'(y) (dense_act.glsl) and, with SUM,
// its bias gradient (the column sums) in the same pass: dy, y and dpre are
// [rows, n], db [n]. One invocation per column, so neighbouring invocations
// read and write neighbouring words and each sum has a fixed order (the same
// bits every run).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ACT = 0;
layout(constant_id = 2) const bool SUM = false;
#include "index.glsl"

layout(std430, binding = 0) readonly buffer DY { float dy[]; };
layout(std430, binding = 1) readonly buffer Y { float y[]; };
layout(std430, binding = 2) writeonly buffer Dpre { float o[]; };
layout(std430, binding = 3) writeonly buffer DB { float db[]; };
layout(push_constant) uniform Params {
  uint rows;
  uint n;
};

#include "activations.glsl"
#include "dense_act.glsl"

void main() {
  uint j = linear_index();
  if (j >= n) return;
  float sum = 0.0;
  for (uint r = 0u; r < rows; ++r) {
    uint i = r * n + j;
    float d = dy[i] * dense_act_grad(ACT, y[i]);
    o[i] = d;
    sum += d;
  }
  if (SUM) db[j] = sum;
}
