// act(op(A) * op(B) + bias), the fused dense forward on matmul_texel.glsl
// (lavapipe): the bias and the activation are applied as the block is stored,
// so the layer is one dispatch and its pre-activation is never written.
// Included by matmul_bias_act_texel_r<RM>c<RN4>.comp.
//
// Relu is applied in registers. The other activations are applied by a loop
// over the stored block: written once rather than once per register of the
// unrolled block, where every case of the switch (each an exp, a log or a
// division) would be compiled for all 64 vec4 registers before the unused
// cases are dropped, doubling the pipeline's build time on lavapipe.
vec4 bias_at(uint n);
void activate_stored(uint m0, uint n_lane, uint n_stride);
vec4 relu_in_registers(vec4 v);
// The chunk's bias is read once for all its rows.
#define STORE_SETUP(n) vec4 chunk_bias = bias_at(n);
#define MATMUL_EPILOGUE(m, n, v) relu_in_registers((v) + chunk_bias)
#define C_READ
#define AFTER_STORE(m0, n_lane, n_stride) activate_stored(m0, n_lane, n_stride)
#include "matmul_texel.glsl"

layout(std430, binding = 3) readonly buffer Bias { float bias[]; };
layout(constant_id = 6) const uint ACT = 0;  // layers::Activation (dense_act.glsl)

#include "activations.glsl"
#include "dense_act.glsl"

vec4 bias_at(uint n) {
  // Columns past N (never stored) read the last bias instead of past the end.
  uint last = N - 1u;
  return vec4(bias[min(n, last)], bias[min(n + 1u, last)], bias[min(n + 2u, last)],
              bias[min(n + 3u, last)]);
}

vec4 relu_in_registers(vec4 v) { return ACT == 1u ? max(v, 0.0) : v; }

void activate_stored(uint m0, uint n_lane, uint n_stride) {
  if (ACT <= 1u || m0 >= M) return;
  // Bounds from the push constants: a loop Mesa cannot unroll.
  uint rows = min(uint(RM), M - m0);
  for (uint r = 0u; r < rows; ++r) {
    for (uint q = 0u; q < uint(RN4); ++q) {
      uint n = n_lane + q * n_stride;
      uint o = C_INDEX(m0 + r, n);
      for (uint j = 0u; j < 4u && n + j < N; ++j) c[o + j] = dense_act4(ACT, vec4(c[o + j])).x;
    }
  }
}
