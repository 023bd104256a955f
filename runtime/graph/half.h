#pragma once
// Conversions between f32 and the half types on the host, bit for bit what
// shaders/half.glsl does on the device: round to nearest, ties to even;
// overflow to infinity; subnormals kept; NaN stays a (quiet) NaN. Feeds of
// half inputs and reads of half tensors go through these.
//
//   std::uint16_t h = vkt::f32_to_f16(1.0f / 3.0f);   // 0x3555
//   float back = vkt::f16_to_f32(h);                   // 0.333251953125f

#include <cstdint>
#include <span>
#include <vector>

#include "shape.h"

namespace vkt {

/// f32 -> IEEE binary16 bits.
std::uint16_t f32_to_f16(float value);
/// f32 -> bfloat16 bits.
std::uint16_t f32_to_bf16(float value);
/// binary16 bits -> f32 (exact).
float f16_to_f32(std::uint16_t bits);
/// bfloat16 bits -> f32 (exact).
float bf16_to_f32(std::uint16_t bits);

/// Whole spans at once, the same bits as the functions above (`out` as long
/// as `in`), written without branches so that the compiler vectorises them:
/// what the half exchange between processes runs on every gradient.
void round_to_f16(std::span<const float> in, std::span<std::uint16_t> out);
void round_to_bf16(std::span<const float> in, std::span<std::uint16_t> out);
void widen_f16(std::span<const std::uint16_t> in, std::span<float> out);
void widen_bf16(std::span<const std::uint16_t> in, std::span<float> out);

/// `values` as `dtype` (F16 or BF16) bits.
std::vector<std::uint16_t> to_half(std::span<const float> values, DType dtype);
/// `values` as a half tensor of `dtype` holds them on a device: to_half's
/// bits, padded with a zero to whole 32-bit words (feeds, variables).
std::vector<std::uint16_t> to_half_words(std::span<const float> values, DType dtype);
/// `dtype` (F16 or BF16) bits as f32 values.
std::vector<float> from_half(std::span<const std::uint16_t> bits, DType dtype);

}  // namespace vkt
