#version 450
#extension GL_GOOGLE_include_directive : require
// Fused attention, forward: out = softmax(scale * q k^T, causal) v for ROWS
// queries of one matrix, walking the keys TILE at a time with the running
// maximum and sum of the online softmax (FlashAttention's recurrence), so the
// [tq, tk] scores exist only a tile at a time in shared memory. Also writes
// each query's log-sum-exp L = m + log(l), which the backward kernels use to
// recompute the probabilities. Dropout (training) zeroes probabilities after
// the normalising sum, as dropout(softmax(s)) v does.
#include "attention.glsl"

layout(std430, binding = 3) readonly buffer Step { uint step_params[]; };  // step, seed, first row
layout(std430, binding = 4) writeonly buffer Out { uint o_words[]; };  // o, then L (lse_word)

shared float Qs[ROWS * DP];
shared float Ks[TILE * DP];
shared float Vs[TILE * D];
shared float Ps[ROWS * TILE];  // scores, then probabilities before dropout
shared float Pd[ROWS * TILE];  // probabilities after dropout

void main() {
  const uint tid = gl_LocalInvocationID.x, r = tid / LANES, lane = tid % LANES;
  const uint bh = gl_WorkGroupID.y, i0 = gl_WorkGroupID.x * ROWS, i = i0 + r;
  for (uint e = tid; e < ROWS * D; e += ROWS * LANES) {
    const uint rr = e / D, d = e % D;
    Qs[rr * DP + d] = i0 + rr < tq ? q_at((bh * tq + i0 + rr) * D + d) : 0.0;
  }
  // Keys past the block's last visible one are skipped whole.
  uint kend = tk;
  if (causal != 0u) kend = uint(clamp(int(i0 + ROWS) + int(tk) - int(tq), 0, int(tk)));
  float m = MASKED, l = 0.0;
  float acc[ACC];
  for (uint u = 0; u < ACC; ++u) acc[u] = 0.0;
  for (uint j0 = 0; j0 < kend; j0 += TILE) {
    barrier();
    for (uint e = tid; e < TILE * D; e += ROWS * LANES) {
      const uint c = e / D, d = e % D;
      const bool inside = j0 + c < tk;
      Ks[c * DP + d] = inside ? k_at((bh * tk + j0 + c) * D + d) : 0.0;
      Vs[c * D + d] = inside ? v_at((bh * tk + j0 + c) * D + d) : 0.0;
    }
    barrier();
    for (uint c = lane; c < TILE; c += LANES) {
      float s = MASKED;
      if (visible(i, j0 + c)) {
        float dot = 0.0;
        for (uint d = 0; d < D; ++d) dot += Qs[r * DP + d] * Ks[c * DP + d];
        s = scale * dot;
      }
      Ps[r * TILE + c] = s;
    }
    barrier();
    float mt = m;
    for (uint c = 0; c < TILE; ++c) mt = max(mt, Ps[r * TILE + c]);
    barrier();
    for (uint c = lane; c < TILE; c += LANES) {
      const float s = Ps[r * TILE + c];
      const float p = s == MASKED ? 0.0 : exp(s - mt);
      Ps[r * TILE + c] = p;
      const bool keep = kept(step_params[0], step_params[1], step_params[2], bh, i, j0 + c);
      Pd[r * TILE + c] = keep ? p * drop_scale : 0.0;
    }
    barrier();
    const float corr = exp(m - mt);  // 1 while the row has seen nothing, 0 < corr <= 1 after
    float sum = 0.0;
    for (uint c = 0; c < TILE; ++c) sum += Ps[r * TILE + c];
    l = l * corr + sum;
    for (uint u = 0; u < ACC; ++u) {
      const uint d = lane + u * LANES;
      if (d >= D) break;
      float pv = 0.0;
      for (uint c = 0; c < TILE; ++c) pv += Pd[r * TILE + c] * Vs[c * D + d];
      acc[u] = acc[u] * corr + pv;
    }
    m = mt;
  }
  // 0 / 0 = NaN for a row with no key.
  if (O_TYPE == 0u) {
    for (uint u = 0; u < ACC; ++u) {
      const uint d = lane + u * LANES;
      if (d < D && i < tq) o_words[(bh * tq + i) * D + d] = floatBitsToUint(acc[u] / l);
    }
  } else {
    // Half results leave two to a word, so a word is one invocation's: the
    // rows pass through shared memory (Qs is read no more), and with D even a
    // word never straddles two rows, nor two workgroups.
    barrier();
    for (uint u = 0; u < ACC; ++u) {
      const uint d = lane + u * LANES;
      if (d < D) Qs[r * DP + d] = acc[u] / l;
    }
    barrier();
    for (uint w = tid; w < ROWS * D / 2u; w += ROWS * LANES) {
      const uint rr = 2u * w / D, d = 2u * w % D;
      if (i0 + rr >= tq) continue;
      const uint lo = from_f32_bits(O_TYPE, floatBitsToUint(Qs[rr * DP + d]));
      const uint hi = from_f32_bits(O_TYPE, floatBitsToUint(Qs[rr * DP + d + 1u]));
      o_words[((bh * tq + i0 + rr) * D + d) / 2u] = lo | (hi << 16);
    }
  }
  if (lane == 0u && i < tq) {
    o_words[lse_word(gl_NumWorkGroups.y) + bh * tq + i] = floatBitsToUint(m + log(l));
  }
}
