#version 450
// FTRL-Proximal as TensorFlow's FtrlOptimizer (see optimizers/ftrl.h):
// H = (learning_rate_power, l1, l2). Slots: accumulator, linear.
#extension GL_GOOGLE_include_directive : require
#include "optimizer_common.glsl"

void update(uint p, vec4 g, uvec3 slot) {
  float power = H[0], l1 = H[1], l2 = H[2];
  vec4 w = arena[p];
  vec4 accum = arena[slot.x];
  vec4 accum_new = accum + g * g;
  vec4 sigma = (pow(accum_new, vec4(-power)) - pow(accum, vec4(-power))) / LR;
  vec4 linear = arena[slot.y] + g - sigma * w;
  vec4 quadratic = pow(accum_new, vec4(-power)) / LR + 2.0 * l2;
  arena[slot.x] = accum_new;
  arena[slot.y] = linear;
  vec4 shrunk = (sign(linear) * l1 - linear) / quadratic;
  arena[p] = mix(vec4(0.0), shrunk, greaterThan(abs(linear), vec4(l1)));
}
