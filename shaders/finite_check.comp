#version 450
// The loss scaler's check of one optimizer call's gradients (optimizers/
// loss_scaler.cpp): how many are inf or NaN, counted by chunk_sum.glsl's two
// passes (each chunk's count, then their sum: exact in float up to 2^24, and
// never 0 when any is found), and the scale's inverse for the update.
//
// A value is inf or NaN when its exponent bits are all ones: an integer test,
// which no compiler may fold away as it may x != x or isinf() when it assumes
// finite math.
#extension GL_GOOGLE_include_directive : require
// [0] 1 / scale, [1] 1 if this call's gradients hold an inf or NaN, [2] 1 if
// this call's or any earlier call's of the step do, [3 + c] chunk c's count.
#define PARTIALS 3
float chunk_value(float a) {
  return (floatBitsToUint(a) & 0x7f800000u) == 0x7f800000u ? 1.0 : 0.0;
}
#include "chunk_sum.glsl"

// The loss scale (a variable); the step's previous check, when there is one.
layout(std430, binding = 3) readonly buffer Scale { float loss_scale[]; };
layout(std430, binding = 4) readonly buffer Previous { float previous[]; };
layout(constant_id = 2) const bool HAS_PREVIOUS = false;

// 1 / s, exact for the powers of two a loss scale always is: frexp gives
// s = 0.5 * 2^e, so 1 / s = 2^(1 - e).
float inverse(float s) {
  int e;
  float m = frexp(s, e);
  return m == 0.5 ? ldexp(1.0, 1 - e) : 1.0 / s;
}

void main() {
  if (chunk_pass()) return;
  float count = chunks_total();
  if (gl_LocalInvocationID.x == 0) {
    float found = count > 0.0 ? 1.0 : 0.0;
    norm[0] = inverse(loss_scale[0]);
    norm[1] = found;
    norm[2] = HAS_PREVIOUS ? max(found, previous[2]) : found;
  }
}
