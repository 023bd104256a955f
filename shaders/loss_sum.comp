#version 450
// out = scale * sum over S of w[i] * loss_at(i): a loss and its reduction in one
// dispatch of one workgroup. Each invocation sums a strided share, then a
// tree in shared memory adds the 64 partial sums, always in the same order,
// so a replayed step gives the same bits. 64 invocations, not 256: lavapipe
// runs a workgroup's invocations 8 at a time and switches between them at
// every barrier, so the tree's 6 barriers over 64 cost a quarter of 8 over 256
// (the loss is a small share of a step's work; its dispatch was 2.5 trivial
// ones in a tiny model's step, vkt-bench-step-overhead --commands).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
layout(constant_id = 1) const uint OP = 0;
layout(constant_id = 2) const bool HAS_W = false;

layout(std430, binding = 0) readonly buffer Z { uint z_bits[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) readonly buffer W { float w[]; };
layout(std430, binding = 3) writeonly buffer Out { float o[]; };

#include "losses.glsl"

shared float partial[64];

void main() {
  uint t = gl_LocalInvocationID.x;
  float acc = 0.0;
  for (uint i = t; i < n; i += 64) {
    float l = loss_at(OP, i);
    acc += HAS_W ? weight_of(i) * l : l;
  }
  partial[t] = acc;
  barrier();
  for (uint half_size = 32; half_size > 0; half_size /= 2) {
    if (t < half_size) partial[t] += partial[t + half_size];
    barrier();
  }
  if (t == 0) o[0] = scale * partial[0];
}
