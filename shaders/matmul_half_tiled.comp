#version 450
// C = op(A) op(B) for half matrices (TYPE 1 f16, 2 bf16) on the tiled kernel
// for GPUs (matmul_tiled.glsl), where the device has no cooperative matrices
// for the type: elements read two a word and widened exactly (half.glsl),
// the same register tiles and f32 sums in k order as the f32 kernel, each
// output rounded once to TYPE and stored as a 16-bit word. Batched products
// ([batch, M, K] and so on) take one workgroup layer (z) per matrix; a matrix
// may start in the middle of a 32-bit word.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_16bit_storage : require
#define MATMUL_CUSTOM_OPERANDS
#define MATMUL_WORD_OPERANDS
#define MATMUL_OUTPUT_DECLARED
layout(std430, binding = 2) writeonly buffer C { uint16_t c16[]; };
layout(constant_id = 18) const uint TYPE = 1u;
#include "half.glsl"
#define MATMUL_STORE(i, v) c16[i] = uint16_t(from_f32_bits(TYPE, floatBitsToUint(v)))
#include "matmul_tiled.glsl"

float widen(uint word, uint e) {
  return uintBitsToFloat(to_f32_bits(TYPE, (word >> ((e & 1u) * 16u)) & 0xffffu));
}

float a_at(uint m, uint k) {
  if (m >= M || k >= K) return 0.0;
  uint e = gl_WorkGroupID.z * M * K + (TRANS_A ? k * M + m : m * K + k);
  return widen(a_words[e >> 1], e);
}
float b_at(uint k, uint n) {
  if (k >= K || n >= N) return 0.0;
  uint e = gl_WorkGroupID.z * K * N + (TRANS_B ? n * K + k : k * N + n);
  return widen(b_words[e >> 1], e);
}
uint c_index(uint m, uint n) { return gl_WorkGroupID.z * M * N + m * N + n; }
