#version 450
// The batched matmul for GPUs: C[b] = op(A[b]) * op(B[b]) for every b of a
// rank-3 batch, on matmul_tiled.glsl's kernel with each operand's batch
// offset added, one batch per workgroup z.
#extension GL_GOOGLE_include_directive : require
#define MATMUL_CUSTOM_OPERANDS
// batch0: the first batch of this dispatch (the batch is split into several
// dispatches past the device's workgroup-count limit in z).
#define MATMUL_EXTRA_PARAMS uint batch0;
#include "matmul_tiled.glsl"

uint batch() { return batch0 + gl_WorkGroupID.z; }

float a_at(uint m, uint k) {
  if (m >= M || k >= K) return 0.0;
  return a[batch() * M * K + (TRANS_A ? k * M + m : m * K + k)];
}
float b_at(uint k, uint n) {
  if (k >= K || n >= N) return 0.0;
  return b[batch() * K * N + (TRANS_B ? n * K + k : k * N + n)];
}
uint c_index(uint m, uint n) { return batch() * M * N + m * N + n; }
