// The elementwise ops, shared by unary.comp, binary.comp and
// elementwise_chain.comp. The codes are UnaryKind (runtime/graph/ops/unary.cpp)
// and BinaryKind (binary.cpp); a fused chain numbers binary ops from 32.
// Include after activations.glsl.
//
// The arithmetic ops compute `precise` values (SPIR-V NoContraction): a fused
// chain puts one op's multiply next to the next op's add, and a driver that
// contracts them into one fma (NVIDIA's does) would round differently from the
// same ops run one kernel each; the fused and unfused paths must give the same
// bits.
#define EXACT(e)           \
  {                        \
    precise float r_ = (e); \
    return r_;             \
  }

#include "half.glsl"

// v rounded to the nearest value of a half type (1 f16, 2 bf16), kept f32.
float round_half(uint type, float v) {
  return uintBitsToFloat(to_f32_bits(type, from_f32_bits(type, floatBitsToUint(v))));
}

// Unary op `op` of v; alpha is its parameter (leaky_relu slope, elu alpha, pow
// exponent).
float unary_op(uint op, float v, float alpha) {
  switch (op) {
    case 0: return -v;
    case 1: return abs(v);
    case 2: return exp(v);
    case 3: return log(v);
    case 4: return sqrt(v);
    case 5: EXACT(v * v)
    case 6: return power(v, alpha);
    case 7: return max(v, 0.0);
    case 8: EXACT(v >= 0.0 ? v : alpha * v)
    case 9: EXACT(v > 0.0 ? v : alpha * (exp(v) - 1.0))
    case 10: return gelu_tanh(v);
    case 11: return sigmoid(v);
    case 12: return stable_tanh(v);
    case 13: return softplus(v);
    case 14: return sign(v);
    case 16: return gelu_erf(v);
    case 17: return round_half(1u, v);
    case 18: return round_half(2u, v);
    case 19: EXACT(v * sigmoid(v))
    default: return v;  // 15: identity
  }
}

// Binary op `op` of x and y.
float binary_op(uint op, float x, float y) {
  switch (op) {
    case 0: EXACT(x + y)
    case 1: EXACT(x - y)
    case 2: EXACT(x * y)
    case 3: EXACT(x / y)
    case 4: return max(x, y);
    case 5: return min(x, y);
    case 6: return x >= y ? 1.0 : 0.0;
    case 7: return x == y ? 1.0 : 0.0;
    case 8: return x != y ? 1.0 : 0.0;
    case 9: EXACT(y == 0.0 ? 0.0 : x / y)
    case 10: return x > y ? 1.0 : 0.0;
    default: return x;  // 11: broadcast a
  }
}
