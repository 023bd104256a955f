// FTRL-Proximal as TensorFlow's FtrlOptimizer (see optimizers/ftrl.h):
// H = (k = -learning_rate_power, l1, 2 * l2, 1 / lr, k == 0.5), the derived
// values formed in double on the host. Slots: accumulator, linear.
// One body for vec4 and float: T, LD, ST (the variable) and LD0..2, ST0..2 (its slots) come from the includer.
void update(uint p, T g, uvec3 slot) {
  float k = H[0], l1 = H[1], two_l2 = H[2], inv_lr = H[3];
  bool root = H[4] != 0.0;  // x^0.5 as sqrt, correctly rounded, as TensorFlow does
  T w = LD(p);
  T accum = LD0(slot.x);
  T accum_new = accum + g * g;
  T power_new = root ? sqrt(accum_new) : pow(accum_new, T(k));
  T power_old = root ? sqrt(accum) : pow(accum, T(k));
  T linear = LD1(slot.y) + g - (power_new - power_old) * inv_lr * w;
  T quadratic = power_new * inv_lr + two_l2;
  ST0(slot.x, accum_new);
  ST1(slot.y, linear);
  T shrunk = (sign(linear) * l1 - linear) / quadratic;
  ST(p, mix(T(0.0), shrunk, gt(abs(linear), T(l1))));
}
