// The backward products of a fused dense layer on matmul_texel.glsl (lavapipe),
// with dpre = dy * act'(y) formed as dy is loaded, so dpre is never written:
//   DY_OPERAND 0: dx = dpre * W^T  (A = dy [M, K], B = W [N, K] transposed)
//   DY_OPERAND 1: dW = x^T * dpre  (A = x [K, M] transposed, B = dy [K, N])
// y (binding 3) has dy's shape and so dy's alignment. Included by
// matmul_dact_texel_r<RM>c<RN4>.comp.
vec4 dpre_a(uint e);
vec4 dpre_b(uint e);
#define MATMUL_EXTRA_PARAMS uint y_last;
#define A_ROW(i, m, k0) mask_k(dpre_a((m) * K + (k0)), k0)
#define B_ROW(k, n) dpre_b((k) * N + (n))
#include "matmul_texel.glsl"

layout(binding = 3) uniform samplerBuffer Y;
layout(constant_id = 6) const uint ACT = 0;  // layers::Activation (dense_act.glsl)
layout(constant_id = 7) const uint DY_OPERAND = 0;

#include "activations.glsl"
#include "dense_act.glsl"

vec4 load_y(uint e, bool aligned) {
  uint t = e >> 2;
  vec4 x = texelFetch(Y, int(min(t, y_last)));
  if (aligned) return x;
  return shift4(x, texelFetch(Y, int(min(t + 1u, y_last))), e & 3u);
}
vec4 dpre_a(uint e) {
  if (DY_OPERAND != 0u) return load_a(e);
  return dense_dpre4(ACT, load_a(e), load_y(e, A_ALIGNED));
}
vec4 dpre_b(uint e) {
  if (DY_OPERAND != 1u) return load_b(e);
  return dense_dpre4(ACT, load_b(e), load_y(e, B_ALIGNED));
}
