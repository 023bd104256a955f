#include "half.h"

#include <fmt/format.h>
#include <bit>

#include <cmath>

#include "../vulkan/error.h"

namespace vkt {

std::uint16_t f32_to_f16(float value) {
  const auto x = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t e = (x >> 23) & 0xffu, m = x & 0x7fffffu;
  if (e == 0xffu) {  // infinity, or NaN with its top payload bits and the quiet bit
    return static_cast<std::uint16_t>(sign | 0x7c00u | (m != 0 ? 0x200u | (m >> 13) : 0u));
  }
  const int exp = static_cast<int>(e) - 112;  // rebias 127 -> 15
  if (exp >= 31) return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (exp >= 1) {
    // A carry out of the mantissa steps the exponent, up to infinity: right.
    std::uint32_t h = (static_cast<std::uint32_t>(exp) << 10) | (m >> 13);
    const std::uint32_t rest = m & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u) != 0)) ++h;
    return static_cast<std::uint16_t>(sign | h);
  }
  // A half subnormal (or zero): units of 2^-24 are (1.m) x 2^(exp - 14).
  const int shift = 14 - exp;
  if (shift > 24) return static_cast<std::uint16_t>(sign);  // below half the smallest
  const std::uint32_t mant = m | 0x800000u;
  std::uint32_t h = mant >> shift;
  const std::uint32_t rest = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (h & 1u) != 0)) ++h;
  return static_cast<std::uint16_t>(sign | h);
}

std::uint16_t f32_to_bf16(float value) {
  const auto x = std::bit_cast<std::uint32_t>(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

float f16_to_f32(std::uint16_t bits) {
  const std::uint32_t sign = (bits & 0x8000u) << 16;
  const std::uint32_t e = (bits >> 10) & 0x1fu, m = bits & 0x3ffu;
  if (e == 0x1fu) return std::bit_cast<float>(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    const float magnitude = std::ldexp(static_cast<float>(m), -24);  // exact
    return sign != 0 ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
}

float bf16_to_f32(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

std::vector<std::uint16_t> to_half(std::span<const float> values, DType dtype) {
  if (!is_half(dtype)) throw Error(fmt::format("to_half: {} is not a half type", to_string(dtype)));
  std::vector<std::uint16_t> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    out[i] = dtype == DType::F16 ? f32_to_f16(values[i]) : f32_to_bf16(values[i]);
  }
  return out;
}

std::vector<float> from_half(std::span<const std::uint16_t> bits, DType dtype) {
  if (!is_half(dtype)) {
    throw Error(fmt::format("from_half: {} is not a half type", to_string(dtype)));
  }
  std::vector<float> out(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) {
    out[i] = dtype == DType::F16 ? f16_to_f32(bits[i]) : bf16_to_f32(bits[i]);
  }
  return out;
}

}  // namespace vkt
