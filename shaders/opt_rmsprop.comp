#version 450
// RMSprop as torch.optim.RMSprop (see optimizers/rmsprop.h):
// h = (alpha, eps, weight_decay, momentum, centered). Slots: square_avg,
// momentum_buffer, grad_avg.
#extension GL_GOOGLE_include_directive : require
#include "optimizer_common.glsl"

void update(uint p, float g, uvec3 slot) {
  float alpha = h[0], eps = h[1], weight_decay = h[2], momentum = h[3];
  bool centered = h[4] != 0.0;
  float w = arena[p];
  g += weight_decay * w;
  float sq = alpha * arena[slot.x] + (1.0 - alpha) * g * g;
  arena[slot.x] = sq;
  float avg;
  if (centered) {
    float ga = alpha * arena[slot.z] + (1.0 - alpha) * g;
    arena[slot.z] = ga;
    avg = sqrt(sq - ga * ga) + eps;
  } else {
    avg = sqrt(sq) + eps;
  }
  if (momentum > 0.0) {
    float buf = momentum * arena[slot.y] + g / avg;
    arena[slot.y] = buf;
    arena[p] = w - lr * buf;
  } else {
    arena[p] = w - lr * g / avg;
  }
}
