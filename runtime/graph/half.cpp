#include "half.h"

#include <fmt/format.h>

#include <algorithm>
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

// The span versions: every case computed, the right one selected.

void round_to_f16(std::span<const float> in, std::span<std::uint16_t> out) {
  const std::size_t n = std::min(in.size(), out.size());
  for (std::size_t i = 0; i < n; ++i) {
    const auto x = std::bit_cast<std::uint32_t>(in[i]);
    const std::uint32_t a = x & 0x7fffffffu;
    // A half normal: rebias (127 -> 15) and round the 13 dropped bits to
    // nearest even; a carry steps the exponent, and anything past the largest
    // half is infinity.
    const std::uint32_t normal =
        std::min((a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13, 0x7c00u);
    // A half subnormal: adding 0.5 leaves units of 2^-24 in the mantissa,
    // rounded to nearest even by the addition itself.
    const std::uint32_t subnormal =
        std::bit_cast<std::uint32_t>(std::bit_cast<float>(a) + 0.5f) - 0x3f000000u;
    const std::uint32_t nan = 0x7e00u | ((a & 0x7fffffu) >> 13);
    const std::uint32_t h = a > 0x7f800000u ? nan : a >= 0x38800000u ? normal : subnormal;
    out[i] = static_cast<std::uint16_t>(((x >> 16) & 0x8000u) | h);
  }
}

void round_to_bf16(std::span<const float> in, std::span<std::uint16_t> out) {
  const std::size_t n = std::min(in.size(), out.size());
  for (std::size_t i = 0; i < n; ++i) {
    const auto x = std::bit_cast<std::uint32_t>(in[i]);
    const std::uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    const std::uint32_t nan = (x >> 16) | 0x40u;
    out[i] = static_cast<std::uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
  }
}

void widen_f16(std::span<const std::uint16_t> in, std::span<float> out) {
  const std::size_t n = std::min(in.size(), out.size());
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t h = in[i];
    const std::uint32_t shifted = (h & 0x7fffu) << 13, e = shifted & 0x0f800000u;
    const std::uint32_t normal = shifted + 0x38000000u;   // rebias 15 -> 127
    const std::uint32_t special = shifted + 0x70000000u;  // infinity, NaN
    // A subnormal's m x 2^-24, exactly: (1 + m 2^-10) 2^-14 less 2^-14.
    const std::uint32_t subnormal = std::bit_cast<std::uint32_t>(
        std::bit_cast<float>(shifted + 0x38800000u) - std::bit_cast<float>(0x38800000u));
    const std::uint32_t f = e == 0x0f800000u ? special : e == 0 ? subnormal : normal;
    out[i] = std::bit_cast<float>(((h & 0x8000u) << 16) | f);
  }
}

void widen_bf16(std::span<const std::uint16_t> in, std::span<float> out) {
  const std::size_t n = std::min(in.size(), out.size());
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = std::bit_cast<float>(static_cast<std::uint32_t>(in[i]) << 16);
  }
}

std::vector<std::uint16_t> to_half(std::span<const float> values, DType dtype) {
  if (!is_half(dtype)) throw Error(fmt::format("to_half: {} is not a half type", to_string(dtype)));
  std::vector<std::uint16_t> out(values.size());
  (dtype == DType::F16 ? round_to_f16 : round_to_bf16)(values, out);
  return out;
}

std::vector<std::uint16_t> to_half_words(std::span<const float> values, DType dtype) {
  std::vector<std::uint16_t> bits = to_half(values, dtype);
  if (bits.size() % 2 != 0) bits.push_back(0);
  return bits;
}

std::vector<float> from_half(std::span<const std::uint16_t> bits, DType dtype) {
  if (!is_half(dtype)) {
    throw Error(fmt::format("from_half: {} is not a half type", to_string(dtype)));
  }
  std::vector<float> out(bits.size());
  (dtype == DType::F16 ? widen_f16 : widen_bf16)(bits, out);
  return out;
}

}  // namespace vkt
