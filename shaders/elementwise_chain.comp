#version 450
// A chain of elementwise ops as one kernel (the Executor's fusion of ops whose
// intermediate results nothing else reads; runtime/graph/ops/elementwise_chain.cpp):
//   v = input[FIRST]; then for each of the STEPS steps
//   v = unary(v), or binary(v, other), or binary(other, v) when SWAPPED,
// where `other` is an input or v itself. The steps are specialization
// constants, so the driver compiles the straight-line code of this chain.
// Each input is read contiguously (index i), as a repeating suffix of the
// output (i % length: a bias row, a scalar) or through 4-D broadcast strides.
// Up to two links of the chain that other ops read too are stored on the way.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
#include "index.glsl"

layout(constant_id = 1) const uint STEPS = 1;
layout(constant_id = 2) const uint FIRST = 0;
// Per input, 2 bits: 0 contiguous, 1 repeating suffix, 2 strided.
layout(constant_id = 3) const uint MODES = 0;
// Per step: code (bits 0-7; binary ops 32 + their code), the other operand
// (bits 8-10: input 0-3, or 4 for v itself), SWAPPED (bit 11).
layout(constant_id = 4) const uint STEP0 = 15;
layout(constant_id = 5) const uint STEP1 = 15;
layout(constant_id = 6) const uint STEP2 = 15;
layout(constant_id = 7) const uint STEP3 = 15;
layout(constant_id = 8) const uint STEP4 = 15;
layout(constant_id = 9) const uint STEP5 = 15;
layout(constant_id = 10) const uint STEP6 = 15;
layout(constant_id = 11) const uint STEP7 = 15;
// Per step, 2 bits: 0, or which of Store1 and Store2 keeps the value it
// computes (a link of the chain that other ops read later).
layout(constant_id = 12) const uint STORES = 0;

layout(std430, binding = 0) readonly buffer In0 { float in0[]; };
layout(std430, binding = 1) readonly buffer In1 { float in1[]; };
layout(std430, binding = 2) readonly buffer In2 { float in2[]; };
layout(std430, binding = 3) readonly buffer In3 { float in3[]; };
layout(std430, binding = 4) writeonly buffer Out { float o[]; };
layout(std430, binding = 5) writeonly buffer Store1 { float store1[]; };
layout(std430, binding = 6) writeonly buffer Store2 { float store2[]; };
layout(push_constant) uniform Params {
  uint n;
  uint pad0, pad1, pad2;
  uvec4 dims;        // output dimensions, outermost first, padded with 1 on the left
  uvec4 strides[4];  // per input: 4-D strides (strided), or x = its length (suffix)
  vec4 alphas[2];    // each step's parameter
};

#include "activations.glsl"
#include "elementwise.glsl"

uint input_index(uint k, uint i) {
  uint mode = (MODES >> (2 * k)) & 3u;
  if (mode == 0u) return i;
  if (mode == 1u) return i % strides[k].x;
  uint rest = i, index = 0;
  for (int d = 3; d >= 0; --d) {
    index += (rest % dims[d]) * strides[k][d];
    rest /= dims[d];
  }
  return index;
}

float load(uint k, uint i) {
  uint at = input_index(k, i);
  switch (k) {
    case 0: return in0[at];
    case 1: return in1[at];
    case 2: return in2[at];
    default: return in3[at];
  }
}

float apply(uint step, float v, float alpha, uint i) {
  uint code = step & 255u;
  if (code < 32u) return unary_op(code, v, alpha);
  uint other = (step >> 8) & 7u;
  float w = other == 4u ? v : load(other, i);
  return (step & 2048u) != 0u ? binary_op(code - 32u, w, v) : binary_op(code - 32u, v, w);
}

void keep(uint s, float v, uint i) {
  uint store = (STORES >> (2 * s)) & 3u;
  if (store == 1u) store1[i] = v;
  if (store == 2u) store2[i] = v;
}

// Written out step by step, not as a loop over an array of the constants: with
// each step's code a constant where it is used, the driver folds the switches
// away (a loop indexing a constant array kept them, 50x slower on lavapipe).
#define STEP(s, WORD, ALPHA)              \
  if (STEPS > s) {                         \
    v = apply(WORD, v, ALPHA, i);          \
    keep(s, v, i);                         \
  }

void main() {
  uint i = linear_index();
  if (i >= n) return;
  float v = load(FIRST, i);
  STEP(0, STEP0, alphas[0].x)
  STEP(1, STEP1, alphas[0].y)
  STEP(2, STEP2, alphas[0].z)
  STEP(3, STEP3, alphas[0].w)
  STEP(4, STEP4, alphas[1].x)
  STEP(5, STEP5, alphas[1].y)
  STEP(6, STEP6, alphas[1].z)
  STEP(7, STEP7, alphas[1].w)
  o[i] = v;
}
