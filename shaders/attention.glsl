// What the fused attention kernels (attention_fwd.comp, attention_bwd_q.comp,
// attention_bwd_kv.comp) share: their parameters, the causal mask and the
// dropout mask. Scores s = scale * q.k of query i and key j are never stored
// in global memory: each kernel recomputes the tile it needs in shared memory.
// A workgroup is ROWS rows (queries, or keys in attention_bwd_kv) of one
// (batch, head) matrix, LANES invocations per row; each sum runs in a fixed
// order whatever the device, so the same inputs give the same bits.
const uint ROWS = 16u;
const uint LANES = 16u;
layout(local_size_x = 256) in;  // ROWS * LANES
layout(constant_id = 0) const uint D = 64u;     // the head dimension
layout(constant_id = 1) const uint TILE = 32u;  // columns (keys, or queries) per step
const uint DP = D + 1u;  // padded row stride: lanes reading different rows hit different banks
const uint ACC = (D + LANES - 1u) / LANES;  // output elements per invocation

layout(push_constant) uniform Params {
  uint tq, tk;   // queries and keys per matrix
  uint heads;    // matrices per example (dropout's rows are examples)
  uint causal;   // key j is masked for query i when j > i + tk - tq
  float scale;   // of the scores
  uint threshold;  // dropout keeps where the hash >= threshold (0: keeps all)
  float drop_scale;  // 1 / (1 - rate), or 1
  uint key;      // the dropout mask's key (the op's place in its graph)
};

// q, k and v (bindings 0-2 of every kernel) as words: f32, or two halves to a
// word (QKV_TYPE 1 f16, 2 bf16) where the precision policy stores them in
// half. Each element is widened exactly as it is read; the arithmetic is f32.
layout(constant_id = 2) const uint QKV_TYPE = 0u;
layout(std430, binding = 0) readonly buffer Q { uint q_words[]; };  // [BH, tq, D]
layout(std430, binding = 1) readonly buffer K { uint k_words[]; };  // [BH, tk, D]
layout(std430, binding = 2) readonly buffer V { uint v_words[]; };  // [BH, tk, D]

#include "half.glsl"

float widened(uint type, uint word, uint e) {
  return uintBitsToFloat(to_f32_bits(type, (word >> ((e & 1u) * 16u)) & 0xffffu));
}
float q_at(uint e) {
  return QKV_TYPE == 0u ? uintBitsToFloat(q_words[e]) : widened(QKV_TYPE, q_words[e >> 1], e);
}
float k_at(uint e) {
  return QKV_TYPE == 0u ? uintBitsToFloat(k_words[e]) : widened(QKV_TYPE, k_words[e >> 1], e);
}
float v_at(uint e) {
  return QKV_TYPE == 0u ? uintBitsToFloat(v_words[e]) : widened(QKV_TYPE, v_words[e >> 1], e);
}

// The forward's output (binding 4 of attention_fwd.comp, read by the backward
// kernels) is one flat buffer: the result o [BH, tq, D], then each query's
// log-sum-exp L [BH, tq] as f32 words. o is f32 (O_TYPE 0), or of q's half
// type (O_TYPE = QKV_TYPE, D even), two elements to a word, as the policy
// stores attention's result; then so is its gradient do.
layout(constant_id = 3) const uint O_TYPE = 0u;

// The word where L starts, for `matrices` (B * H) matrices.
uint lse_word(uint matrices) {
  const uint n = matrices * tq * D;
  return O_TYPE == 0u ? n : (n + 1u) / 2u;
}
// Element e of o (or do) in `words`.
#define O_AT(words, e) \
  (O_TYPE == 0u ? uintBitsToFloat(words[(e)]) : widened(O_TYPE, words[(e) >> 1], (e)))

// A masked score, finite so that no infinity enters the arithmetic.
const float MASKED = -1.0e30;

bool visible(uint i, uint j) {
  return i < tq && j < tk && (causal == 0u || int(j) <= int(i) + int(tk) - int(tq));
}

#include "dropout_hash.glsl"

// Whether dropout keeps probability (i, j) of matrix bh: the hash dropout.comp
// draws for element [b, h, i, j] of the [B, H, tq, tk] probabilities (row b of
// the global batch), so the fused and the composed paths drop the same entries.
bool kept(uint step, uint seed, uint first_row, uint bh, uint i, uint j) {
  if (threshold == 0u) return true;
  const uint h =
      dropout_hash(seed, step, key, first_row + bh / heads, ((bh % heads) * tq + i) * tk + j);
  return h >= threshold;
}
