#version 450
// A summed loss and its gradient wrt predictions or logits in one dispatch of
// one workgroup (the Executor's fusion of a loss op with its gradient op, for
// small losses: runtime/graph/ops/losses.cpp kFusedLossElements). The sum is
// loss_sum.comp's (the same strided shares and the same tree, so the same
// bits); each invocation also writes the gradient of its elements as
// loss_grad.comp does, reusing the row's logsumexp for SPARSE_XENT.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
layout(constant_id = 1) const uint OP = 0;
layout(constant_id = 2) const bool HAS_W = false;

layout(std430, binding = 0) readonly buffer Z { uint z_bits[]; };
layout(std430, binding = 1) readonly buffer X { float x[]; };
layout(std430, binding = 2) readonly buffer DY { float dy[]; };
layout(std430, binding = 3) readonly buffer W { float w[]; };
layout(std430, binding = 4) writeonly buffer Out { float o[]; };
layout(std430, binding = 5) writeonly buffer DX { float dx[]; };

#define LOSS_WRITES_DX
#include "losses.glsl"

shared float partial[64];

void main() {
  uint t = gl_LocalInvocationID.x;
  float g0 = dy[0] * scale;
  float acc = 0.0;
  for (uint i = t; i < n; i += 64) {
    float wi = HAS_W ? weight_of(i) : 1.0;
    float l = write_loss_grad(OP, i, HAS_W ? g0 * wi : g0, false);
    acc += HAS_W ? wi * l : l;
  }
  partial[t] = acc;
  barrier();
  for (uint half_size = 32; half_size > 0; half_size /= 2) {
    if (t < half_size) partial[t] += partial[t + half_size];
    barrier();
  }
  if (t == 0) o[0] = scale * partial[0];
}
