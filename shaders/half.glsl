// Conversions between f32 bits and the half types' bits, in integer
// arithmetic so that every device gives the same bits (no shaderFloat16
// needed, no float rounding mode or denormal flushing involved): round to
// nearest, ties to even; overflow to infinity; subnormals kept; NaN stays a
// quiet NaN. runtime/graph/half.cpp is the same on the host.

#ifndef HALF_GLSL
#define HALF_GLSL

uint f32_to_f16_bits(uint x) {
  uint sign = (x >> 16) & 0x8000u;
  uint e = (x >> 23) & 0xffu, m = x & 0x7fffffu;
  if (e == 0xffu) return sign | 0x7c00u | (m != 0u ? 0x200u | (m >> 13) : 0u);
  int exp = int(e) - 112;
  if (exp >= 31) return sign | 0x7c00u;
  if (exp >= 1) {
    uint h = (uint(exp) << 10) | (m >> 13);
    uint rest = m & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u) != 0u)) ++h;
    return sign | h;
  }
  int shift = 14 - exp;
  if (shift > 24) return sign;
  uint mant = m | 0x800000u;
  uint h = mant >> uint(shift);
  uint rest = mant & ((1u << uint(shift)) - 1u), half_unit = 1u << uint(shift - 1);
  if (rest > half_unit || (rest == half_unit && (h & 1u) != 0u)) ++h;
  return sign | h;
}

uint f32_to_bf16_bits(uint x) {
  if ((x & 0x7fffffffu) > 0x7f800000u) return ((x >> 16) | 0x40u) & 0xffffu;
  return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}

uint f16_bits_to_f32(uint h) {
  uint sign = (h & 0x8000u) << 16;
  uint e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return sign | 0x7f800000u | (m << 13);
  if (e == 0u) {
    if (m == 0u) return sign;
    // A subnormal: normalize the mantissa (its value m x 2^-24 is a normal f32).
    uint lead = uint(findMSB(m));  // 0..9
    return sign | ((lead + 103u) << 23) | ((m << (23u - lead)) & 0x7fffffu);
  }
  return sign | ((e + 112u) << 23) | (m << 13);
}

uint bf16_bits_to_f32(uint h) { return h << 16; }

// Type codes, as the specialization constants that name them: 0 f32, 1 f16, 2 bf16.
uint to_f32_bits(uint code, uint h) { return code == 1u ? f16_bits_to_f32(h) : bf16_bits_to_f32(h); }
uint from_f32_bits(uint code, uint x) { return code == 1u ? f32_to_f16_bits(x) : f32_to_bf16_bits(x); }

#endif  // HALF_GLSL
