// RMSprop as torch.optim.RMSprop (see optimizers/rmsprop.h):
// H = (alpha, 1 - alpha (formed in double on the host), eps, weight_decay,
// momentum, centered). Slots: square_avg, momentum_buffer, grad_avg.
// One body for vec4 and float: T, LD, ST (the variable) and LD0..2, ST0..2 (its slots) come from the includer.
void update(uint p, T g, uvec3 slot) {
  float alpha = H[0], one_minus_alpha = H[1], eps = H[2], weight_decay = H[3];
  float momentum = H[4];
  bool centered = H[5] != 0.0;
  T w = LD(p);
  g += weight_decay * w;
  T sq = alpha * LD0(slot.x) + one_minus_alpha * g * g;
  ST0(slot.x, sq);
  T avg;
  if (centered) {
    T ga = alpha * LD2(slot.z) + one_minus_alpha * g;
    ST2(slot.z, ga);
    avg = sqrt(sq - ga * ga) + eps;
  } else {
    avg = sqrt(sq) + eps;
  }
  if (momentum > 0.0) {
    T buf = momentum * LD1(slot.y) + g / avg;
    ST1(slot.y, buf);
    ST(p, w - LR * buf);
  } else {
    ST(p, w - LR * g / avg);
  }
}
