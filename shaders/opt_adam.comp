#version 450
// Adam and AdamW as torch.optim.Adam/AdamW (see optimizers/adam.h):
// H = (beta1, beta2, eps, weight_decay, 1 - beta1^t, 1 - beta2^t, flags) with
// flags bit 0 = amsgrad, bit 1 = decoupled weight decay (AdamW).
// Slots: m, v, and v_max (amsgrad).
#extension GL_GOOGLE_include_directive : require
#include "optimizer_common.glsl"

void update(uint p, vec4 g, uvec3 slot) {
  float beta1 = H[0], beta2 = H[1], eps = H[2], weight_decay = H[3];
  float bias1 = H[4], bias2 = H[5];
  uint flags = uint(H[6]);
  vec4 w = arena[p];
  if ((flags & 2u) != 0u) {
    w *= 1.0 - LR * weight_decay;
  } else {
    g += weight_decay * w;
  }
  vec4 m = beta1 * arena[slot.x] + (1.0 - beta1) * g;
  vec4 v = beta2 * arena[slot.y] + (1.0 - beta2) * g * g;
  arena[slot.x] = m;
  arena[slot.y] = v;
  if ((flags & 1u) != 0u) {
    v = max(arena[slot.z], v);
    arena[slot.z] = v;
  }
  vec4 denom = sqrt(v) / sqrt(bias2) + eps;
  arena[p] = w - (LR / bias1) * m / denom;
}
