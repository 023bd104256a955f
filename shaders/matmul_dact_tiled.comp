#version 450
// The backward products of a fused dense layer on matmul_tiled.glsl (the
// variant for GPUs), dpre = dy * act'(y) formed as dy is staged:
//   DY_OPERAND 0: dx = dpre * W^T  (A = dy [M, K], B = W [N, K] transposed)
//   DY_OPERAND 1: dW = x^T * dpre  (A = x [K, M] transposed, B = dy [K, N])
#extension GL_GOOGLE_include_directive : require
#define MATMUL_CUSTOM_OPERANDS
#include "matmul_tiled.glsl"

layout(std430, binding = 3) readonly buffer Y { float y[]; };
layout(constant_id = 9) const uint ACT = 0;  // layers::Activation (dense_act.glsl)
layout(constant_id = 10) const uint DY_OPERAND = 0;

#include "activations.glsl"
#include "dense_act.glsl"

float a_at(uint m, uint k) {
  if (m >= M || k >= K) return 0.0;
  uint e = TRANS_A ? k * M + m : m * K + k;
  return DY_OPERAND == 0u ? a[e] * dense_act_grad(ACT, y[e]) : a[e];
}
float b_at(uint k, uint n) {
  if (k >= K || n >= N) return 0.0;
  uint e = TRANS_B ? n * K + k : k * N + n;
  return DY_OPERAND == 1u ? b[e] * dense_act_grad(ACT, y[e]) : b[e];
}
uint c_index(uint m, uint n) { return m * N + n; }
