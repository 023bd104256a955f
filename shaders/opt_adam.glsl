// Adam and AdamW as torch.optim.Adam/AdamW (see optimizers/adam.h):
// H = (beta1, 1 - beta1, beta2, 1 - beta2, eps, weight_decay (L2, Adam; 0 for
// AdamW), decay (1 - lr * weight_decay, AdamW; 1 for Adam), step size
// lr / (1 - beta1^t), sqrt(1 - beta2^t), amsgrad), every derived value formed
// in double on the host. Slots: m, v, and v_max (amsgrad).
// One body for vec4 and float: T, LD, ST (the variable) and LD0..2, ST0..2 (its slots) come from the includer.
void update(uint p, T g, uvec3 slot) {
  float beta1 = H[0], one_minus_beta1 = H[1], beta2 = H[2], one_minus_beta2 = H[3];
  float eps = H[4], weight_decay = H[5], decay = H[6], step_size = H[7], bias2_sqrt = H[8];
  bool amsgrad = H[9] != 0.0;
  T w = LD(p) * decay;
  g += weight_decay * w;
  T m = beta1 * LD0(slot.x) + one_minus_beta1 * g;
  T v = beta2 * LD1(slot.y) + one_minus_beta2 * g * g;
  ST0(slot.x, m);
  ST1(slot.y, v);
  if (amsgrad) {
    v = max(LD2(slot.z), v);
    ST2(slot.z, v);
  }
  T denom = sqrt(v) / bias2_sqrt + eps;
  ST(p, w - step_size * m / denom);
}
