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
// Inputs and outputs may be half tensors (TYPES), two to a 32-bit word: a
// half input is widened exactly as it is read, and when any output is half
// each invocation computes two elements and writes whole words (no two
// invocations share one), as cast.comp does. The arithmetic is f32 throughout.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x_id = 0) in;
#include "index.glsl"

layout(constant_id = 1) const uint STEPS = 1;
layout(constant_id = 2) const uint FIRST = 0;
// Per input, 2 bits: 0 contiguous, 1 repeating suffix, 2 strided.
layout(constant_id = 3) const uint MODES = 0;
// Per step: code (bits 0-7; binary ops 32 + their code, a unary op's gradient
// 64 + its code), the other operand
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
// Element types (0 f32, 1 f16, 2 bf16), 2 bits each: inputs 0-3 (bits 0-7),
// the output (bits 8-9), Store1 (10-11) and Store2 (12-13).
layout(constant_id = 13) const uint TYPES = 0;
// How many of the inputs the chain reads (1-4): bindings past them repeat the
// last one and are never read.
layout(constant_id = 14) const uint INPUTS = 1;
const bool PAIRED = ((TYPES >> 8) & 63u) != 0u;
const bool HAS_STORE1 = (STORES & 0x5555u) != 0u;
const bool HAS_STORE2 = (STORES & 0xaaaau) != 0u;

// Words, f32 or two halves, whatever the tensors' types.
layout(std430, binding = 0) readonly buffer In0 { uint in0[]; };
layout(std430, binding = 1) readonly buffer In1 { uint in1[]; };
layout(std430, binding = 2) readonly buffer In2 { uint in2[]; };
layout(std430, binding = 3) readonly buffer In3 { uint in3[]; };
layout(std430, binding = 4) writeonly buffer Out { uint o[]; };
layout(std430, binding = 5) writeonly buffer Store1 { uint store1[]; };
layout(std430, binding = 6) writeonly buffer Store2 { uint store2[]; };
layout(push_constant) uniform Params {
  uint n;
  uint pad0, pad1, pad2;
  uvec4 dims;        // output dimensions, outermost first, padded with 1 on the left
  uvec4 strides[4];  // per input: 4-D strides (strided), or x = its length (suffix)
  vec4 alphas[2];    // each step's parameter
};

#include "activations.glsl"
#include "elementwise.glsl"
#include "unary_grad.glsl"

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

uint word_of(uint k, uint at) {
  switch (k) {
    case 0: return in0[at];
    case 1: return in1[at];
    case 2: return in2[at];
    default: return in3[at];
  }
}

float load(uint k, uint i) {
  uint at = input_index(k, i);
  uint type = (TYPES >> (2 * k)) & 3u;
  if (type == 0u) return uintBitsToFloat(word_of(k, at));
  uint bits = (word_of(k, at >> 1) >> ((at & 1u) * 16u)) & 0xffffu;
  return uintBitsToFloat(to_f32_bits(type, bits));
}

// The element's value of each input the chain reads, loaded once: every step
// that reads an input picks it here rather than loading it again, which keeps
// the code the driver compiles before it folds the constants small.
float value0 = 0.0, value1 = 0.0, value2 = 0.0, value3 = 0.0;

void load_inputs(uint i) {
  value0 = load(0u, i);
  if (INPUTS > 1u) value1 = load(1u, i);
  if (INPUTS > 2u) value2 = load(2u, i);
  if (INPUTS > 3u) value3 = load(3u, i);
}

float input_value(uint k) {
  switch (k) {
    case 0: return value0;
    case 1: return value1;
    case 2: return value2;
    default: return value3;
  }
}

float apply(uint step, float v, float alpha) {
  uint code = step & 255u;
  if (code < 32u) return unary_op(code, v, alpha);
  uint other = (step >> 8) & 7u;
  float w = other == 4u ? v : input_value(other);
  bool swapped = (step & 2048u) != 0u;
  if (code >= 64u) {
    // A unary op's gradient over (t, dy): dy * f'(t), as unary_grad.comp.
    float t = swapped ? w : v, dy = swapped ? v : w;
    return dy * unary_derivative(code - 64u, t, t, alpha);
  }
  return swapped ? binary_op(code - 32u, w, v) : binary_op(code - 32u, v, w);
}

// The links other ops read, as the chain computes them.
float kept1 = 0.0, kept2 = 0.0;

void keep(uint s, float v) {
  uint store = (STORES >> (2 * s)) & 3u;
  if (store == 1u) kept1 = v;
  if (store == 2u) kept2 = v;
}

// Step s's word: a constant once the loop below is unrolled and s is one.
uint step_word(uint s) {
  switch (s) {
    case 0: return STEP0;
    case 1: return STEP1;
    case 2: return STEP2;
    case 3: return STEP3;
    case 4: return STEP4;
    case 5: return STEP5;
    case 6: return STEP6;
    default: return STEP7;
  }
}

// Element i of the chain's output; its stored links in kept1 and kept2.
// The steps are a loop marked for unrolling, with a known count (STEPS): the
// driver folds the one body's constants it can, then unrolls it and folds
// each step's code to its op. Eight steps written out would each carry every
// op's code until the folding (about 4x the compile time on lavapipe, the same
// code after); a loop over an array of the constants, unmarked, kept its
// switches at run time (50x slower).
float chain_value(uint i) {
  load_inputs(i);
  float v = input_value(FIRST);
  [[unroll]] for (uint s = 0u; s < STEPS; ++s) {
    v = apply(step_word(s), v, alphas[s / 4u][s % 4u]);
    keep(s, v);
  }
  return v;
}

void write_word(uint target, uint at, uint w) {
  if (target == 0u) o[at] = w;
  if (target == 1u) store1[at] = w;
  if (target == 2u) store2[at] = w;
}

// Elements `first` and, when `second`, first + 1 of a target (0 the output, 1
// and 2 the stores) in its type: two f32 words or one word of two halves (an
// odd count leaves the last word's high half 0, as cast.comp does).
void write_pair(uint target, uint first, bool second, float a, float b) {
  uint type = (TYPES >> (8u + 2u * target)) & 3u;
  if (type == 0u) {
    write_word(target, first, floatBitsToUint(a));
    if (second) write_word(target, first + 1u, floatBitsToUint(b));
  } else {
    uint hi = second ? from_f32_bits(type, floatBitsToUint(b)) : 0u;
    write_word(target, first >> 1, from_f32_bits(type, floatBitsToUint(a)) | (hi << 16));
  }
}

void main() {
  if (!PAIRED) {
    uint i = linear_index();
    if (i >= n) return;
    o[i] = floatBitsToUint(chain_value(i));
    if (HAS_STORE1) store1[i] = floatBitsToUint(kept1);
    if (HAS_STORE2) store2[i] = floatBitsToUint(kept2);
    return;
  }
  uint first = linear_index() * 2u;
  if (first >= n) return;
  bool second = first + 1u < n;
  // The two elements by a loop the driver unrolls once the chain's code is
  // folded, rather than two calls it would compile twice. An odd count's last
  // invocation computes its one element twice and writes it once.
  float a = 0.0, a1 = 0.0, a2 = 0.0, b = 0.0, b1 = 0.0, b2 = 0.0;
  [[unroll]] for (uint e = 0u; e < 2u; ++e) {
    float v = chain_value(second ? first + e : first);
    if (e == 0u) {
      a = v;
      a1 = kept1;
      a2 = kept2;
    } else {
      b = v;
      b1 = kept1;
      b2 = kept2;
    }
  }
  write_pair(0u, first, second, a, b);
  if (HAS_STORE1) write_pair(1u, first, second, a1, b1);
  if (HAS_STORE2) write_pair(2u, first, second, a2, b2);
}
