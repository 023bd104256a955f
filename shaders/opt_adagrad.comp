#version 450
// Adagrad as torch.optim.Adagrad (see optimizers/adagrad.h):
// h = (lr_decay, eps, weight_decay, step t). Slot 0: the sum of squares.
#extension GL_GOOGLE_include_directive : require
#include "optimizer_common.glsl"

void update(uint p, float g, uvec3 slot) {
  float lr_decay = h[0], eps = h[1], weight_decay = h[2], t = h[3];
  float w = arena[p];
  g += weight_decay * w;
  float clr = lr / (1.0 + (t - 1.0) * lr_decay);
  float sum = arena[slot.x] + g * g;
  arena[slot.x] = sum;
  arena[p] = w - clr * g / (sqrt(sum) + eps);
}
