// Numerically careful activations shared by unary.comp and unary_grad.comp.

const float SQRT_2_OVER_PI = 0.7978845608028654;
const float GELU_C = 0.044715;

// tanh without overflow for large |v| (exp of a non-positive number only).
float stable_tanh(float v) {
  float t = exp(-2.0 * abs(v));
  return sign(v) * (1.0 - t) / (1.0 + t);
}

float sigmoid(float v) {
  if (v >= 0.0) return 1.0 / (1.0 + exp(-v));
  float e = exp(v);
  return e / (1.0 + e);
}

// log(1 + exp(v)) = max(v, 0) + log(1 + exp(-|v|)).
float softplus(float v) { return max(v, 0.0) + log(1.0 + exp(-abs(v))); }

float gelu_tanh(float v) {
  return 0.5 * v * (1.0 + stable_tanh(SQRT_2_OVER_PI * (v + GELU_C * v * v * v)));
}

// x^c with GLSL's pow undefined for x < 0: integer exponents keep the sign rule.
float power(float v, float c) {
  if (c == 0.0) return 1.0;
  if (v >= 0.0) return pow(v, c);
  float r = pow(-v, c);
  return (fract(c) == 0.0 && mod(c, 2.0) == 1.0) ? -r : (fract(c) == 0.0 ? r : 0.0 / 0.0);
}
