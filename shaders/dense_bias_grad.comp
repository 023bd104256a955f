#version 450
// A fused dense layer's bias gradient: db[j] = sum over rows of dy * act'(y),
// with dy and y viewed as [rows, n] (dense_act.glsl). Either way the sum has
// a fixed order, so the bits are the same every run:
//   TREE: as reduce_rows.comp, one workgroup per output, each invocation
//         folding every WG-th row, then a tree in shared memory (few outputs
//         over many rows);
//   else: one invocation per output summing its column row by row (many
//         outputs: neighbouring invocations read neighbouring words, and no
//         barriers, which lavapipe runs slowly across a thousand workgroups).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint ACT = 0;
layout(constant_id = 2) const bool TREE = true;

layout(std430, binding = 0) readonly buffer DY { float dy[]; };
layout(std430, binding = 1) readonly buffer Y { float y[]; };
layout(std430, binding = 2) writeonly buffer DB { float db[]; };
layout(push_constant) uniform Params {
  uint rows;
  uint n;
};

#include "activations.glsl"
#include "dense_act.glsl"

shared float partial[gl_WorkGroupSize.x];

void main() {
  if (!TREE) {
    uint j = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    if (j >= n) return;
    float sum = 0.0;
    for (uint r = 0u; r < rows; ++r) sum += dy[r * n + j] * dense_act_grad(ACT, y[r * n + j]);
    db[j] = sum;
    return;
  }
  uint column = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  uint lane = gl_LocalInvocationID.x;
  float acc = 0.0;
  if (column < n) {
    for (uint r = lane; r < rows; r += gl_WorkGroupSize.x) {
      uint i = r * n + column;
      acc += dy[i] * dense_act_grad(ACT, y[i]);
    }
  }
  partial[lane] = acc;
  barrier();
  for (uint half_ = gl_WorkGroupSize.x / 2u; half_ > 0u; half_ /= 2u) {
    if (lane < half_) partial[lane] += partial[lane + half_];
    barrier();
  }
  if (lane == 0u && column < n) db[column] = partial[0];
}
