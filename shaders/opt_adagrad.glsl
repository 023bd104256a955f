// Adagrad as torch.optim.Adagrad (see optimizers/adagrad.h):
// H = (lr_decay, eps, weight_decay, step t). Slot 0: the sum of squares.
// One body for vec4 and float: T, LD and ST come from the includer.
void update(uint p, T g, uvec3 slot) {
  float lr_decay = H[0], eps = H[1], weight_decay = H[2], t = H[3];
  T w = LD(p);
  g += weight_decay * w;
  float clr = LR / (1.0 + (t - 1.0) * lr_decay);
  T sum = LD(slot.x) + g * g;
  ST(slot.x, sum);
  ST(p, w - clr * g / (sqrt(sum) + eps));
}
