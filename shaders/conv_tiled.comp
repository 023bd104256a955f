#version 450
// conv2d and its gradients as implicit GEMMs on the tiled matmul (the variant
// for GPUs, matmul_tiled.glsl): each operand element is found through
// conv_geometry.glsl as the tile is staged, so the im2col matrix never exists.
#extension GL_GOOGLE_include_directive : require
#include "conv_params.glsl"
#define MATMUL_CUSTOM_OPERANDS
#define MATMUL_EXTRA_PARAMS uint a_last, b_last; CONV_PARAMS
#include "matmul_tiled.glsl"
#define CONV_GROUP mm_group()

layout(constant_id = 9) const uint CONV_MODE = 0u;

#include "conv_geometry.glsl"

float a_at(uint m, uint k) {
  if (m >= M || k >= K) return 0.0;
  int e = a_index(m, k);
  return e < 0 ? 0.0 : a[e];
}
float b_at(uint k, uint n) {
  if (k >= K || n >= N) return 0.0;
  return b[b_index(k, n)];
}
uint c_index(uint m, uint n) { return c_at(m, n); }
