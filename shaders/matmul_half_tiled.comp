#version 450
// C = op(A) op(B) for half matrices (TYPE 1 f16, 2 bf16) on the tiled kernel
// for GPUs (matmul_tiled.glsl), where the device has no cooperative matrices
// for the type: the f32 kernel's tiles, register blocks and f32 sums in k
// order on elements widened exactly (matmul_half_operands.glsl), each output
// rounded once to TYPE (half.glsl, the cast's rounding) and stored as a
// 16-bit word. Batched products ([batch, M, K] and so on) take one workgroup
// layer (z) per matrix. A split k takes matmul_half_tiled_split.comp.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_16bit_storage : require
#define MATMUL_CUSTOM_OPERANDS
#define MATMUL_WORD_OPERANDS
#define MATMUL_OUTPUT_DECLARED
layout(std430, binding = 2) writeonly buffer C { uint16_t c16[]; };
layout(constant_id = 18) const uint TYPE = 1u;
#include "half.glsl"
#define MATMUL_STORE(i, v) c16[i] = uint16_t(from_f32_bits(TYPE, floatBitsToUint(v)))
#include "matmul_tiled.glsl"
#include "matmul_half_operands.glsl"
