// FTRL-Proximal as TensorFlow's FtrlOptimizer (see optimizers/ftrl.h):
// H = (learning_rate_power, l1, l2). Slots: accumulator, linear.
// One body for vec4 and float: T, LD and ST come from the includer.
void update(uint p, T g, uvec3 slot) {
  float power = H[0], l1 = H[1], l2 = H[2];
  T w = LD(p);
  T accum = LD(slot.x);
  T accum_new = accum + g * g;
  T sigma = (pow(accum_new, T(-power)) - pow(accum, T(-power))) / LR;
  T linear = LD(slot.y) + g - sigma * w;
  T quadratic = pow(accum_new, T(-power)) / LR + 2.0 * l2;
  ST(slot.x, accum_new);
  ST(slot.y, linear);
  T shrunk = (sign(linear) * l1 - linear) / quadratic;
  ST(p, mix(T(0.0), shrunk, gt(abs(linear), T(l1))));
}
