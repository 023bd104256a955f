#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_16bit_storage : require
// C = op(A) op(B) for half operands (TYPE 1 f16, 2 bf16) and a half result:
// the scalar half kernel, for devices without cooperative matrices. Elements
// are read as 16-bit words and widened exactly to f32 (half.glsl), the
// products are summed in f32 in k order (a fixed order: the same bits on
// every run and tower), and the sum is rounded once to TYPE. op(A) is A, or
// its transpose where TA (A stored [K, M]); likewise TB (B stored [N, K]).
// A 16 x 16 output tile a workgroup; A and B pass through shared memory 16 k
// at a time. Batched products ([batch, M, K] and so on) take one workgroup
// layer (z) per matrix; a matrix may start in the middle of a 32-bit word,
// which 16-bit addressing does not mind.
layout(local_size_x = 16, local_size_y = 16) in;
layout(constant_id = 0) const uint TYPE = 1;
layout(constant_id = 1) const bool TA = false;
layout(constant_id = 2) const bool TB = false;
#include "half.glsl"

layout(std430, binding = 0) readonly buffer A { uint16_t a[]; };
layout(std430, binding = 1) readonly buffer B { uint16_t b[]; };
layout(std430, binding = 2) writeonly buffer C { uint16_t c[]; };
layout(push_constant) uniform Params {
  uint M, N, K;
};

shared float as[16][17];  // [row][k], padded against bank conflicts
shared float bs[16][17];  // [k][column]

float widen(uint h) { return uintBitsToFloat(to_f32_bits(TYPE, h)); }

void main() {
  uint lr = gl_LocalInvocationID.y, lc = gl_LocalInvocationID.x;
  uint row = gl_WorkGroupID.y * 16u + lr, col = gl_WorkGroupID.x * 16u + lc;
  uint z = gl_WorkGroupID.z;
  uint a0 = z * M * K, b0 = z * K * N, c0 = z * M * N;
  float acc = 0.0;
  for (uint k0 = 0u; k0 < K; k0 += 16u) {
    // Invocation (lr, lc) loads A's (row, k0 + lc) and B's (k0 + lr, col).
    uint ka = k0 + lc, kb = k0 + lr;
    as[lr][lc] = row < M && ka < K ? widen(uint(a[a0 + (TA ? ka * M + row : row * K + ka)])) : 0.0;
    bs[lr][lc] = kb < K && col < N ? widen(uint(b[b0 + (TB ? col * K + kb : kb * N + col)])) : 0.0;
    barrier();
    for (uint k = 0u; k < 16u; ++k) acc = fma(as[lr][k], bs[k][lc], acc);
    barrier();
  }
  if (row < M && col < N) {
    c[c0 + row * N + col] = uint16_t(from_f32_bits(TYPE, floatBitsToUint(acc)));
  }
}
