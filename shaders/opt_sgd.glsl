// SGD as torch.optim.SGD (see optimizers/sgd.h): H = (momentum, 1 -
// dampening, nesterov, weight_decay, first_step), 1 - dampening formed in
// double on the host. Slot 0: the momentum buffer.
// One body for vec4 and float: T, LD, ST (the variable) and LD0..2, ST0..2 (its slots) come from the includer.
void update(uint p, T g, uvec3 slot) {
  float momentum = H[0], undamped = H[1], weight_decay = H[3];
  bool nesterov = H[2] != 0.0, first = H[4] != 0.0;
  T w = LD(p);
  g += weight_decay * w;
  if (momentum != 0.0) {
    // PyTorch starts the buffer at the first gradient, undamped.
    T buf = first ? g : momentum * LD0(slot.x) + undamped * g;
    ST0(slot.x, buf);
    g = nesterov ? g + momentum * buf : buf;
  }
  ST(p, w - LR * g);
}
