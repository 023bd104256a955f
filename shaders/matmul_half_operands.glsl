// The operands of matmul_half_tiled.comp and matmul_half_tiled_split.comp,
// included after matmul_tiled.glsl: A and B hold half elements (TYPE, declared
// by the includer with half.glsl) two to a 32-bit word, widened exactly as
// they are read; a matrix of a batch (workgroup layer mm_group()) may start
// in the middle of a word.

float widen(uint word, uint e) {
  return uintBitsToFloat(to_f32_bits(TYPE, (word >> ((e & 1u) * 16u)) & 0xffffu));
}

float a_at(uint m, uint k) {
  if (m >= M || k >= K) return 0.0;
  uint e = mm_group() * M * K + (TRANS_A ? k * M + m : m * K + k);
  return widen(a_words[e >> 1], e);
}
float b_at(uint k, uint n) {
  if (k >= K || n >= N) return 0.0;
  uint e = mm_group() * K * N + (TRANS_B ? n * K + k : k * N + n);
  return widen(b_words[e >> 1], e);
}
uint c_index(uint m, uint n) { return mm_group() * M * N + m * N + n; }
