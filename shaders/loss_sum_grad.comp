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

#include "losses.glsl"

shared float partial[64];

// Element i's unweighted loss; writes its gradient g * d loss / d x.
float loss_and_grad(uint i, float g) {
  if (OP == SPARSE_XENT) {
    uint base = i * classes;
    int label = int(z_bits[i]);
    if (!label_ok(label)) {
      for (uint k = 0; k < classes; ++k) dx[base + k] = quiet_nan();
      return quiet_nan();
    }
    vec2 ml = row_logsumexp(i);
    for (uint k = 0; k < classes; ++k) {
      float p = exp(x[base + k] - ml.x - ml.y);
      dx[base + k] = g * (k == uint(label) ? p - 1.0 : p);
    }
    return ml.y - (x[base + uint(label)] - ml.x);
  }
  float z = OP == IDENTITY ? 0.0 : uintBitsToFloat(z_bits[i]);
  dx[i] = g * pointwise_grad(OP, false, z, x[i]);
  return loss_at(OP, i);
}

void main() {
  uint t = gl_LocalInvocationID.x;
  float g0 = dy[0] * scale;
  float acc = 0.0;
  for (uint i = t; i < n; i += 64) {
    float wi = HAS_W ? weight_of(i) : 1.0;
    float l = loss_and_grad(i, HAS_W ? g0 * wi : g0);
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
