#version 450
// Adagrad as torch.optim.Adagrad (see optimizers/adagrad.h):
// H = (lr_decay, eps, weight_decay, step t). Slot 0: the sum of squares.
#extension GL_GOOGLE_include_directive : require
#include "optimizer_common.glsl"

void update(uint p, vec4 g, uvec3 slot) {
  float lr_decay = H[0], eps = H[1], weight_decay = H[2], t = H[3];
  vec4 w = arena[p];
  g += weight_decay * w;
  float clr = LR / (1.0 + (t - 1.0) * lr_decay);
  vec4 sum = arena[slot.x] + g * g;
  arena[slot.x] = sum;
  arena[p] = w - clr * g / (sqrt(sum) + eps);
}
