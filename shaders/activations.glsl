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

// erf(v) by Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7, under
// float's own rounding near 1); GLSL has no erf.
float erf_as(float v) {
  float t = 1.0 / (1.0 + 0.3275911 * abs(v));
  float poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 +
               t * (-1.453152027 + t * 1.061405429))));
  return sign(v) * (1.0 - poly * exp(-v * v));
}

const float INV_SQRT_2 = 0.7071067811865476;
const float INV_SQRT_2PI = 0.3989422804014327;

// x Phi(x), the exact GELU.
float gelu_erf(float v) { return 0.5 * v * (1.0 + erf_as(v * INV_SQRT_2)); }

// x^c with GLSL's pow undefined for x < 0: integer exponents keep the sign rule.
float power(float v, float c) {
  if (c == 0.0) return 1.0;
  if (v >= 0.0) return pow(v, c);
  float r = pow(-v, c);
  return (fract(c) == 0.0 && mod(c, 2.0) == 1.0) ? -r : (fract(c) == 0.0 ? r : 0.0 / 0.0);
}
