#version 450
// Adam and AdamW as torch.optim.Adam/AdamW (see optimizers/adam.h):
// h = (beta1, beta2, eps, weight_decay, 1 - beta1^t, 1 - beta2^t, flags) with
// flags bit 0 = amsgrad, bit 1 = decoupled weight decay (AdamW).
// Slots: m, v, and v_max (amsgrad).
#extension GL_GOOGLE_include_directive : require
#include "optimizer_common.glsl"

void update(uint p, float g, uvec3 slot) {
  float beta1 = h[0], beta2 = h[1], eps = h[2], weight_decay = h[3];
  float bias1 = h[4], bias2 = h[5];
  uint flags = uint(h[6]);
  float w = arena[p];
  if ((flags & 2u) != 0u) {
    w *= 1.0 - lr * weight_decay;
  } else {
    g += weight_decay * w;
  }
  float m = beta1 * arena[slot.x] + (1.0 - beta1) * g;
  float v = beta2 * arena[slot.y] + (1.0 - beta2) * g * g;
  arena[slot.x] = m;
  arena[slot.y] = v;
  if ((flags & 1u) != 0u) {
    v = max(arena[slot.z], v);
    arena[slot.z] = v;
  }
  float denom = sqrt(v) / sqrt(bias2) + eps;
  arena[p] = w - (lr / bias1) * m / denom;
}
