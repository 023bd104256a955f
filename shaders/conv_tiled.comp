#version 450
// conv2d and its gradients as implicit GEMMs on the tiled matmul (the variant
// for GPUs, matmul_tiled.glsl): each operand element is found through
// conv_geometry.glsl as the tile is staged, so the im2col matrix never exists.
#extension GL_GOOGLE_include_directive : require
#include "conv_params.glsl"
#define MATMUL_CUSTOM_OPERANDS
#define MATMUL_WORD_OPERANDS
#define MATMUL_EXTRA_PARAMS uint a_last, b_last; CONV_PARAMS
#include "matmul_tiled.glsl"
#define CONV_GROUP mm_group()

layout(constant_id = 9) const uint CONV_MODE = 0u;
// The operands' element types: 0 f32, 1 f16, 2 bf16 (two halves a word, where
// the precision policy stores x and the filter in half), widened exactly as
// they are read; the sums are f32.
layout(constant_id = 18) const uint A_TYPE = 0u;
layout(constant_id = 19) const uint B_TYPE = 0u;

#include "half.glsl"

float element(uint type, uint word, uint e) {
  if (type == 0u) return uintBitsToFloat(word);
  return uintBitsToFloat(to_f32_bits(type, (word >> ((e & 1u) * 16u)) & 0xffffu));
}
float a_element(uint e) { return element(A_TYPE, a_words[A_TYPE == 0u ? e : e >> 1], e); }
float b_element(uint e) { return element(B_TYPE, b_words[B_TYPE == 0u ? e : e >> 1], e); }

#include "conv_geometry.glsl"

float a_at(uint m, uint k) {
  if (m >= M || k >= K) return 0.0;
  int e = a_index(m, k);
  return e < 0 ? 0.0 : a_element(uint(e));
}
float b_at(uint k, uint n) {
  if (k >= K || n >= N) return 0.0;
  return b_element(b_index(k, n));
}
uint c_index(uint m, uint n) { return c_at(m, n); }
