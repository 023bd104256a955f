#version 450
#extension GL_GOOGLE_include_directive : require
// Fused attention, backward for q: dq_i = scale * sum_j ds_ij k_j with
// ds_ij = p_ij (dp_ij - delta_i), dp_ij = dropout'(do_i . v_j) and
// delta_i = do_i . o_i, for ROWS queries of one matrix. The probabilities
// p_ij = exp(s_ij - L_i) are recomputed a tile of keys at a time from the
// forward's log-sum-exp. Each workgroup writes its own rows of dq: no atomics,
// fixed order.
#include "attention.glsl"

layout(std430, binding = 3) readonly buffer Step { uint step_params[]; };
layout(std430, binding = 4) readonly buffer Fwd { uint fwd[]; };    // o, then L (lse_word)
layout(std430, binding = 5) readonly buffer DO { uint do_words[]; };  // do [BH, tq, D], as o
layout(std430, binding = 6) writeonly buffer DQ { float dq[]; };     // [BH, tq, D]

shared float Qs[ROWS * DP];
shared float DOs[ROWS * DP];
shared float Ks[TILE * DP];
shared float Vs[TILE * DP];
shared float Ss[ROWS * TILE];
shared float Part[ROWS * LANES];

void main() {
  const uint tid = gl_LocalInvocationID.x, r = tid / LANES, lane = tid % LANES;
  const uint bh = gl_WorkGroupID.y, i0 = gl_WorkGroupID.x * ROWS, i = i0 + r;
  const uint bhs = gl_NumWorkGroups.y;
  for (uint e = tid; e < ROWS * D; e += ROWS * LANES) {
    const uint rr = e / D, d = e % D;
    const bool inside = i0 + rr < tq;
    const uint at = (bh * tq + i0 + rr) * D + d;
    Qs[rr * DP + d] = inside ? q_at(at) : 0.0;
    DOs[rr * DP + d] = inside ? O_AT(do_words, at) : 0.0;
  }
  float part = 0.0;
  if (i < tq) {
    for (uint d = lane; d < D; d += LANES) part += O_AT(do_words, (bh * tq + i) * D + d) * O_AT(fwd, (bh * tq + i) * D + d);
  }
  Part[tid] = part;
  barrier();
  float delta = 0.0;
  for (uint x = 0; x < LANES; ++x) delta += Part[r * LANES + x];
  const float lse = i < tq ? uintBitsToFloat(fwd[lse_word(bhs) + bh * tq + i]) : 0.0;

  uint kend = tk;
  if (causal != 0u) kend = uint(clamp(int(i0 + ROWS) + int(tk) - int(tq), 0, int(tk)));
  float acc[ACC];
  for (uint u = 0; u < ACC; ++u) acc[u] = 0.0;
  for (uint j0 = 0; j0 < kend; j0 += TILE) {
    barrier();
    for (uint e = tid; e < TILE * D; e += ROWS * LANES) {
      const uint c = e / D, d = e % D;
      const bool inside = j0 + c < tk;
      Ks[c * DP + d] = inside ? k_at((bh * tk + j0 + c) * D + d) : 0.0;
      Vs[c * DP + d] = inside ? v_at((bh * tk + j0 + c) * D + d) : 0.0;
    }
    barrier();
    for (uint c = lane; c < TILE; c += LANES) {
      float ds = 0.0;
      if (visible(i, j0 + c)) {
        float s = 0.0, dp = 0.0;
        for (uint d = 0; d < D; ++d) {
          s += Qs[r * DP + d] * Ks[c * DP + d];
          dp += DOs[r * DP + d] * Vs[c * DP + d];
        }
        const float p = exp(scale * s - lse);
        const bool keep = kept(step_params[0], step_params[1], step_params[2], bh, i, j0 + c);
        ds = p * ((keep ? dp * drop_scale : 0.0) - delta);
      }
      Ss[r * TILE + c] = ds;
    }
    barrier();
    for (uint u = 0; u < ACC; ++u) {
      const uint d = lane + u * LANES;
      if (d >= D) break;
      float sum = 0.0;
      for (uint c = 0; c < TILE; ++c) sum += Ss[r * TILE + c] * Ks[c * DP + d];
      acc[u] += sum;
    }
  }
  if (i >= tq) return;
  for (uint u = 0; u < ACC; ++u) {
    const uint d = lane + u * LANES;
    if (d < D) dq[(bh * tq + i) * D + d] = scale * acc[u];
  }
}
