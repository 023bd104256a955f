// Adagrad as torch.optim.Adagrad (see optimizers/adagrad.h): H = (clr =
// lr / (1 + (t - 1) * lr_decay), formed in double on the host, eps,
// weight_decay). Slot 0: the sum of squares.
// One body for vec4 and float: T, LD, ST (the variable) and LD0..2, ST0..2 (its slots) come from the includer.
void update(uint p, T g, uvec3 slot) {
  float clr = H[0], eps = H[1], weight_decay = H[2];
  T w = LD(p);
  g += weight_decay * w;
  T sum = LD0(slot.x) + g * g;
  ST0(slot.x, sum);
  ST(p, w - clr * g / (sqrt(sum) + eps));
}
