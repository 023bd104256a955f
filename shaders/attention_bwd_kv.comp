#version 450
#extension GL_GOOGLE_include_directive : require
// Fused attention, backward for k and v, for ROWS keys of one matrix, walking
// the queries that see them TILE at a time:
//   dv_j = sum_i dropout(p_ij) do_i,  dk_j = scale * sum_i ds_ij q_i,
// with p, ds and delta as in attention_bwd_q.comp. Each workgroup writes its
// own rows of dk and dv: no atomics, fixed order.
#include "attention.glsl"

layout(std430, binding = 3) readonly buffer Step { uint step_params[]; };
layout(std430, binding = 4) readonly buffer Fwd { uint fwd[]; };    // o, then L (lse_word)
layout(std430, binding = 5) readonly buffer DO { uint do_words[]; };  // do [BH, tq, D], as o
layout(std430, binding = 6) writeonly buffer DKV { float dkv[]; };   // dk [BH, tk, D], dv [BH, tk, D]

shared float Ks[ROWS * DP];
shared float Vs[ROWS * DP];
shared float Qs[TILE * DP];
shared float DOs[TILE * DP];
shared float Ls[TILE];
shared float Deltas[TILE];
shared float Pd[ROWS * TILE];
shared float Ss[ROWS * TILE];

void main() {
  const uint tid = gl_LocalInvocationID.x, r = tid / LANES, lane = tid % LANES;
  const uint bh = gl_WorkGroupID.y, j0 = gl_WorkGroupID.x * ROWS, j = j0 + r;
  const uint bhs = gl_NumWorkGroups.y;
  for (uint e = tid; e < ROWS * D; e += ROWS * LANES) {
    const uint c = e / D, d = e % D;
    const bool inside = j0 + c < tk;
    Ks[c * DP + d] = inside ? k_at((bh * tk + j0 + c) * D + d) : 0.0;
    Vs[c * DP + d] = inside ? v_at((bh * tk + j0 + c) * D + d) : 0.0;
  }
  // The first query that sees key j0 (every query when not causal).
  uint istart = 0u;
  if (causal != 0u) istart = uint(max(int(j0) - int(tk) + int(tq), 0));
  float acck[ACC], accv[ACC];
  for (uint u = 0; u < ACC; ++u) {
    acck[u] = 0.0;
    accv[u] = 0.0;
  }
  for (uint i0 = istart; i0 < tq; i0 += TILE) {
    barrier();
    for (uint e = tid; e < TILE * D; e += ROWS * LANES) {
      const uint rr = e / D, d = e % D;
      const bool inside = i0 + rr < tq;
      const uint at = (bh * tq + i0 + rr) * D + d;
      Qs[rr * DP + d] = inside ? q_at(at) : 0.0;
      DOs[rr * DP + d] = inside ? O_AT(do_words, at) : 0.0;
    }
    if (tid < TILE) {
      const uint i = i0 + tid;
      float delta = 0.0, lse = 0.0;
      if (i < tq) {
        for (uint d = 0; d < D; ++d) delta += O_AT(do_words, (bh * tq + i) * D + d) * O_AT(fwd, (bh * tq + i) * D + d);
        lse = uintBitsToFloat(fwd[lse_word(bhs) + bh * tq + i]);
      }
      Deltas[tid] = delta;
      Ls[tid] = lse;
    }
    barrier();
    for (uint c = lane; c < TILE; c += LANES) {
      const uint i = i0 + c;
      float pd = 0.0, ds = 0.0;
      if (visible(i, j)) {
        float s = 0.0, dp = 0.0;
        for (uint d = 0; d < D; ++d) {
          s += Qs[c * DP + d] * Ks[r * DP + d];
          dp += DOs[c * DP + d] * Vs[r * DP + d];
        }
        const float p = exp(scale * s - Ls[c]);
        const bool keep = kept(step_params[0], step_params[1], step_params[2], bh, i, j);
        pd = keep ? p * drop_scale : 0.0;
        ds = p * ((keep ? dp * drop_scale : 0.0) - Deltas[c]);
      }
      Pd[r * TILE + c] = pd;
      Ss[r * TILE + c] = ds;
    }
    barrier();
    for (uint u = 0; u < ACC; ++u) {
      const uint d = lane + u * LANES;
      if (d >= D) break;
      float sv = 0.0, sk = 0.0;
      for (uint c = 0; c < TILE; ++c) {
        sv += Pd[r * TILE + c] * DOs[c * DP + d];
        sk += Ss[r * TILE + c] * Qs[c * DP + d];
      }
      accv[u] += sv;
      acck[u] += sk;
    }
  }
  if (j >= tk) return;
  for (uint u = 0; u < ACC; ++u) {
    const uint d = lane + u * LANES;
    if (d >= D) continue;
    dkv[(bh * tk + j) * D + d] = scale * acck[u];
    dkv[(bhs + bh) * tk * D + j * D + d] = accv[u];
  }
}
