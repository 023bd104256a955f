// Adam and AdamW as torch.optim.Adam/AdamW (see optimizers/adam.h):
// H = (beta1, beta2, eps, weight_decay, 1 - beta1^t, 1 - beta2^t, flags) with
// flags bit 0 = amsgrad, bit 1 = decoupled weight decay (AdamW).
// Slots: m, v, and v_max (amsgrad).
// One body for vec4 and float: T, LD and ST come from the includer.
void update(uint p, T g, uvec3 slot) {
  float beta1 = H[0], beta2 = H[1], eps = H[2], weight_decay = H[3];
  float bias1 = H[4], bias2 = H[5];
  uint flags = uint(H[6]);
  T w = LD(p);
  if ((flags & 2u) != 0u) {
    w *= 1.0 - LR * weight_decay;
  } else {
    g += weight_decay * w;
  }
  T m = beta1 * LD(slot.x) + (1.0 - beta1) * g;
  T v = beta2 * LD(slot.y) + (1.0 - beta2) * g * g;
  ST(slot.x, m);
  ST(slot.y, v);
  if ((flags & 1u) != 0u) {
    v = max(LD(slot.z), v);
    ST(slot.z, v);
  }
  T denom = sqrt(v) / sqrt(bias2) + eps;
  ST(p, w - (LR / bias1) * m / denom);
}
