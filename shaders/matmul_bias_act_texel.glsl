// act(op(A) * op(B) + bias), the fused dense forward on matmul_texel.glsl
// (lavapipe): the bias and the activation are applied in the store epilogue,
// so the layer is one dispatch and its pre-activation is never written.
// Included by matmul_bias_act_texel_r<RM>c<RN4>.comp.
vec4 bias_act(uint n, vec4 v);
#define MATMUL_EPILOGUE(m, n, v) bias_act(n, v)
#include "matmul_texel.glsl"

layout(std430, binding = 3) readonly buffer Bias { float bias[]; };
layout(constant_id = 6) const uint ACT = 0;  // layers::Activation (dense_act.glsl)

#include "activations.glsl"
#include "dense_act.glsl"

vec4 bias_act(uint n, vec4 v) {
  // Columns past N (never stored) read the last bias instead of past the end.
  uint last = N - 1u;
  vec4 b = vec4(bias[min(n, last)], bias[min(n + 1u, last)], bias[min(n + 2u, last)],
                bias[min(n + 3u, last)]);
  return dense_act4(ACT, v + b);
}
