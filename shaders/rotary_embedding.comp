#version 450
#extension GL_GOOGLE_include_directive : require
// Rotary position embedding, Hugging Face's half-split form, for x [B, H, T, Dh]:
// entries i and i + Dh/2 of a row at position p turn by angle p * inv_freq[i],
//   y[i]        = x[i] cos - x[i + Dh/2] sin
//   y[i + Dh/2] = x[i + Dh/2] cos + x[i] sin,
// one invocation per such pair. A direction of -1 turns the other way: the gradient
// (a rotation's transpose is its inverse).
//
// The angle is the f32 product of the position and inv_freq[i], as Hugging Face
// computes it, so the angles are PyTorch's bit for bit. GLSL's sin and cos are
// only specified to 2^-11 on [-pi, pi] (and not at all beyond), while the
// angles reach thousands of radians: the angle is reduced by pi/2 in three
// parts (Cody and Waite; k * PIO2_1 and k * PIO2_2 are exact for |k| < 2^16,
// angles up to ~1e5), and sin and cos of the rest, within pi/4, are Taylor
// polynomials to f32's precision.
layout(local_size_x_id = 0) in;
#include "index.glsl"

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Positions { int positions[]; };  // [T] or [B, T]
layout(std430, binding = 2) readonly buffer InvFreq { float inv_freq[]; };   // [Dh / 2]
layout(std430, binding = 3) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Params {
  uint pairs;    // B * H * T * Dh / 2
  uint half_dh;  // Dh / 2
  uint seq;      // T
  uint heads;    // H
  uint batched;  // 1: positions [B, T], 0: [T]
  float direction;  // 1 forward, -1 the inverse rotation
};

const float TWO_OVER_PI = 0.636619772367581;
const float PIO2_1 = 1.5703125;                 // 8 significant bits
const float PIO2_2 = 4.825592041015625e-4;      // 8 significant bits
const float PIO2_3 = 1.2675908465098473e-6;     // pi/2 - PIO2_1 - PIO2_2, rounded

// cos and sin of `angle` to about an f32 ulp.
void cos_sin(float angle, out float c, out float s) {
  float k = round(angle * TWO_OVER_PI);
  precise float r = ((angle - k * PIO2_1) - k * PIO2_2) - k * PIO2_3;
  float r2 = r * r;
  float sin_r = r + r * r2 * (-1.0 / 6.0 + r2 * (1.0 / 120.0 + r2 * (-1.0 / 5040.0 +
                r2 * (1.0 / 362880.0 + r2 * (-1.0 / 39916800.0)))));
  float cos_r = 1.0 + r2 * (-0.5 + r2 * (1.0 / 24.0 + r2 * (-1.0 / 720.0 +
                r2 * (1.0 / 40320.0 + r2 * (-1.0 / 3628800.0 + r2 * (1.0 / 479001600.0))))));
  // angle = k pi/2 + r: turn (cos r, sin r) by k quarter turns.
  uint quadrant = uint(int(k)) & 3u;
  if (quadrant == 0u) { c = cos_r; s = sin_r; }
  else if (quadrant == 1u) { c = -sin_r; s = cos_r; }
  else if (quadrant == 2u) { c = -cos_r; s = -sin_r; }
  else { c = sin_r; s = -cos_r; }
}

void main() {
  uint p = linear_index();
  if (p >= pairs) return;
  uint i = p % half_dh;
  uint row = p / half_dh;  // over [B, H, T]
  uint t = row % seq;
  uint b = row / seq / heads;
  int pos = positions[batched != 0u ? b * seq + t : t];
  precise float angle = float(pos) * inv_freq[i];  // never fused into the reduction
  float c, s;
  cos_sin(angle, c, s);
  s *= direction;
  uint first = row * 2u * half_dh + i;
  float a = x[first], b2 = x[first + half_dh];
  // As PyTorch rounds x * cos + rotate_half(x) * sin: two products, then the sum.
  precise float y0 = a * c - b2 * s;
  precise float y1 = b2 * c + a * s;
  y[first] = y0;
  y[first + half_dh] = y1;
}
