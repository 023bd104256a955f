// Numerically careful activations shared by unary.comp and unary_grad.comp.

const float SQRT_2_OVER_PI = 0.7978845608028654;
const float GELU_C = 0.044715;

// v >= 0 ? a : b, for float and vec4 alike.
float select_ge0(float v, float a, float b) { return v >= 0.0 ? a : b; }
vec4 select_ge0(vec4 v, vec4 a, vec4 b) { return mix(b, a, greaterThanEqual(v, vec4(0.0))); }

// Each activation for float and, written once, for vec4: the fused matmul
// epilogues apply them four outputs at a time, one copy of the code per four
// outputs, which keeps their unrolled kernels quick to compile.
//   stable_tanh: tanh without overflow for large |v| (exp of a non-positive
//     number only).
//   sigmoid: 1 / (1 + exp(-v)) for v >= 0, exp(v) / (1 + exp(v)) below.
//   softplus: log(1 + exp(v)) = max(v, 0) + log(1 + exp(-|v|)).
#define VKT_ACTIVATIONS(T)                                                          \
  T stable_tanh(T v) {                                                              \
    T t = exp(-2.0 * abs(v));                                                       \
    return sign(v) * (1.0 - t) / (1.0 + t);                                         \
  }                                                                                 \
  T sigmoid(T v) {                                                                  \
    T e = exp(-abs(v));                                                             \
    return select_ge0(v, T(1.0), e) / (1.0 + e);                                    \
  }                                                                                 \
  T softplus(T v) { return max(v, 0.0) + log(1.0 + exp(-abs(v))); }                \
  T gelu_tanh(T v) {                                                                \
    return 0.5 * v * (1.0 + stable_tanh(SQRT_2_OVER_PI * (v + GELU_C * v * v * v))); \
  }
VKT_ACTIVATIONS(float)
VKT_ACTIVATIONS(vec4)

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
