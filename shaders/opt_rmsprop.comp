#version 450
// RMSprop as torch.optim.RMSprop (see optimizers/rmsprop.h):
// H = (alpha, eps, weight_decay, momentum, centered). Slots: square_avg,
// momentum_buffer, grad_avg.
#extension GL_GOOGLE_include_directive : require
#include "optimizer_common.glsl"

void update(uint p, vec4 g, uvec3 slot) {
  float alpha = H[0], eps = H[1], weight_decay = H[2], momentum = H[3];
  bool centered = H[4] != 0.0;
  vec4 w = arena[p];
  g += weight_decay * w;
  vec4 sq = alpha * arena[slot.x] + (1.0 - alpha) * g * g;
  arena[slot.x] = sq;
  vec4 avg;
  if (centered) {
    vec4 ga = alpha * arena[slot.z] + (1.0 - alpha) * g;
    arena[slot.z] = ga;
    avg = sqrt(sq - ga * ga) + eps;
  } else {
    avg = sqrt(sq) + eps;
  }
  if (momentum > 0.0) {
    vec4 buf = momentum * arena[slot.y] + g / avg;
    arena[slot.y] = buf;
    arena[p] = w - LR * buf;
  } else {
    arena[p] = w - LR * g / avg;
  }
}
