#version 450
// FTRL-Proximal as TensorFlow's FtrlOptimizer (see optimizers/ftrl.h):
// h = (learning_rate_power, l1, l2). Slots: accumulator, linear.
#extension GL_GOOGLE_include_directive : require
#include "optimizer_common.glsl"

void update(uint p, float g, uvec3 slot) {
  float power = h[0], l1 = h[1], l2 = h[2];
  float w = arena[p];
  float accum = arena[slot.x];
  float accum_new = accum + g * g;
  float sigma = (pow(accum_new, -power) - pow(accum, -power)) / lr;
  float linear = arena[slot.y] + g - sigma * w;
  float quadratic = pow(accum_new, -power) / lr + 2.0 * l2;
  arena[slot.x] = accum_new;
  arena[slot.y] = linear;
  arena[p] = abs(linear) > l1 ? (sign(linear) * l1 - linear) / quadratic : 0.0;
}
