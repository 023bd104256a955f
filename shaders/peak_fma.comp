#version 450
// The device's arithmetic roof (bench/device_roof.cpp): CHAINS independent
// vec4 multiply-add chains per invocation, each held in registers, stepped
// 8 times per loop iteration so the loop's own cost stays small. The chains
// are written out (not an array indexed in a loop bounded by CHAINS), because
// lavapipe does not unroll such loops and keeps the array in memory; the
// `CHAINS > k` tests fold away once the constant is specialized. The sum of
// the chains is stored so that the compiler cannot drop the work.
// FLOPs per invocation: iterations * 8 steps * CHAINS * 4 components * 2.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint CHAINS = 8;  // 1..16

layout(std430, set = 0, binding = 0) writeonly buffer Out { vec4 result[]; };

layout(push_constant) uniform Params {
  float mul;
  float add;
  uint iterations;
};

// fma() so that a GPU compiler emits one FMA whatever its contraction rules;
// llvmpipe turns it (and a * m + c) into a vmulps and a vaddps (seen in its
// JIT code), so lavapipe's roof is that of separate multiplies and adds.
#define STEP(a) a = fma(a, m, c)
// One step of every chain, chains interleaved so that neighbouring
// instructions are independent (LLVM regroups them on lavapipe; the CPU's
// out-of-order window overlaps them again).
#define ROUND                      \
  STEP(a0);                        \
  if (CHAINS > 1) STEP(a1);        \
  if (CHAINS > 2) STEP(a2);        \
  if (CHAINS > 3) STEP(a3);        \
  if (CHAINS > 4) STEP(a4);        \
  if (CHAINS > 5) STEP(a5);        \
  if (CHAINS > 6) STEP(a6);        \
  if (CHAINS > 7) STEP(a7);        \
  if (CHAINS > 8) STEP(a8);        \
  if (CHAINS > 9) STEP(a9);        \
  if (CHAINS > 10) STEP(a10);      \
  if (CHAINS > 11) STEP(a11);      \
  if (CHAINS > 12) STEP(a12);      \
  if (CHAINS > 13) STEP(a13);      \
  if (CHAINS > 14) STEP(a14);      \
  if (CHAINS > 15) STEP(a15)
#define ROUND8 ROUND; ROUND; ROUND; ROUND; ROUND; ROUND; ROUND; ROUND

void main() {
  const uint id = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  const vec4 m = vec4(mul);
  const vec4 c = vec4(add);
  const vec4 seed = vec4(float(id & 1023u)) * (1.0 / 1024.0) + vec4(0.0, 0.25, 0.5, 0.75);
  vec4 a0 = seed, a1 = seed + 1.0, a2 = seed + 2.0, a3 = seed + 3.0;
  vec4 a4 = seed + 4.0, a5 = seed + 5.0, a6 = seed + 6.0, a7 = seed + 7.0;
  vec4 a8 = seed + 8.0, a9 = seed + 9.0, a10 = seed + 10.0, a11 = seed + 11.0;
  vec4 a12 = seed + 12.0, a13 = seed + 13.0, a14 = seed + 14.0, a15 = seed + 15.0;
  for (uint i = 0; i < iterations; ++i) {
    ROUND8;
  }
  vec4 sum = a0;
  if (CHAINS > 1) sum += a1;
  if (CHAINS > 2) sum += a2;
  if (CHAINS > 3) sum += a3;
  if (CHAINS > 4) sum += a4;
  if (CHAINS > 5) sum += a5;
  if (CHAINS > 6) sum += a6;
  if (CHAINS > 7) sum += a7;
  if (CHAINS > 8) sum += a8;
  if (CHAINS > 9) sum += a9;
  if (CHAINS > 10) sum += a10;
  if (CHAINS > 11) sum += a11;
  if (CHAINS > 12) sum += a12;
  if (CHAINS > 13) sum += a13;
  if (CHAINS > 14) sum += a14;
  if (CHAINS > 15) sum += a15;
  result[id] = sum;
}
