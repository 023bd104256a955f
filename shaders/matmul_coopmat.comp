#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_NV_cooperative_matrix : require
// C = op(A) op(B) for f16 operands and an f16 result on cooperative matrices
// (tensor cores, VK_NV_cooperative_matrix): LM x LK times LK x LN f16
// products summed into LM x LN f32 accumulators, the sum rounded once to f16
// (half.glsl, nearest-even, as the tiled half kernel). TA, TB, the batch
// layer (z) and the push constants are matmul_half_tiled.comp's; only the
// order in which the hardware sums inside one product differs from it (a
// fixed order: the same bits run to run).
//
// A workgroup of WM x WN subgroups computes a BM x BN tile of C; each
// subgroup a TM x TN grid of accumulators. A and B pass through shared
// memory BK deep, zero-padded past the edges, so any M, N and K work; the
// cooperative loads read shared memory only, whose offsets and strides are
// multiples of 16 bytes.
layout(local_size_x_id = 0) in;  // WM * WN * SUBGROUP
layout(constant_id = 1) const bool TA = false;
layout(constant_id = 2) const bool TB = false;
layout(constant_id = 3) const uint LM = 16;  // the device's cooperative shape
layout(constant_id = 4) const uint LN = 8;
layout(constant_id = 5) const uint LK = 16;
layout(constant_id = 6) const uint WM = 2;  // subgroups down and across the tile
layout(constant_id = 7) const uint WN = 2;
layout(constant_id = 8) const uint TM = 2;  // accumulators per subgroup, down and across
layout(constant_id = 9) const uint TN = 4;
layout(constant_id = 10) const uint BK = 32;  // a multiple of LK
#include "half.glsl"

const uint BM = WM * TM * LM;
const uint BN = WN * TN * LN;
const uint SA = BK + 8u;  // row strides in shared memory: 16-byte multiples, off the banks
const uint SB = BN + 8u;

layout(std430, binding = 0) readonly buffer A { float16_t a[]; };
layout(std430, binding = 1) readonly buffer B { float16_t b[]; };
layout(std430, binding = 2) writeonly buffer C { uint16_t c[]; };
layout(push_constant) uniform Params {
  uint M, N, K;
};

shared float16_t as[BM * SA];  // [row][k]
shared float16_t bs[BK * SB];  // [k][column]
shared float cs[WM * WN * LM * LN];  // one accumulator per subgroup, on its way out

void main() {
  const uint threads = gl_WorkGroupSize.x;
  const uint tid = gl_LocalInvocationID.x;
  // Subgroups past WM x WN (a device whose subgroups are smaller than the
  // size the workgroup was made for) load and wait, and multiply nothing.
  const uint sg = gl_SubgroupID;
  const bool multiplies = sg < WM * WN;
  const uint wr = sg / WN, wc = sg % WN;
  const uint row0 = gl_WorkGroupID.y * BM, col0 = gl_WorkGroupID.x * BN;
  const uint z = gl_WorkGroupID.z;
  const uint a0 = z * M * K, b0 = z * K * N, c0 = z * M * N;

  fcoopmatNV<32, gl_ScopeSubgroup, LM, LN> acc[TM * TN];
  for (uint i = 0u; i < TM * TN; ++i) acc[i] = fcoopmatNV<32, gl_ScopeSubgroup, LM, LN>(0.0);

  for (uint k0 = 0u; k0 < K; k0 += BK) {
    // Neighbouring invocations take neighbouring elements of memory's
    // faster axis: k for A, the column for B (the rows when transposed).
    for (uint i = tid; i < BM * BK; i += threads) {
      const uint r = TA ? i % BM : i / BK, k = TA ? i / BM : i % BK;
      const uint gr = row0 + r, gk = k0 + k;
      as[r * SA + k] = gr < M && gk < K ? a[a0 + (TA ? gk * M + gr : gr * K + gk)]
                                        : float16_t(0.0);
    }
    for (uint i = tid; i < BK * BN; i += threads) {
      const uint k = TB ? i % BK : i / BN, n = TB ? i / BK : i % BN;
      const uint gk = k0 + k, gn = col0 + n;
      bs[k * SB + n] = gk < K && gn < N ? b[b0 + (TB ? gn * K + gk : gk * N + gn)]
                                        : float16_t(0.0);
    }
    barrier();
    if (multiplies) {
      for (uint k = 0u; k < BK; k += LK) {
        fcoopmatNV<16, gl_ScopeSubgroup, LM, LK> ma[TM];
        for (uint i = 0u; i < TM; ++i) {
          coopMatLoadNV(ma[i], as, ((wr * TM + i) * LM) * SA + k, SA, false);
        }
        for (uint j = 0u; j < TN; ++j) {
          fcoopmatNV<16, gl_ScopeSubgroup, LK, LN> mb;
          coopMatLoadNV(mb, bs, k * SB + (wc * TN + j) * LN, SB, false);
          for (uint i = 0u; i < TM; ++i) acc[i * TN + j] = coopMatMulAddNV(ma[i], mb, acc[i * TN + j]);
        }
      }
    }
    barrier();
  }

  // Out through shared memory, one accumulator per subgroup at a time: the
  // edges are bounds-checked and each sum rounded with half.glsl's integer
  // rounding (the tiled half kernel's bits for the same f32 sum).
  for (uint i = 0u; i < TM; ++i) {
    for (uint j = 0u; j < TN; ++j) {
      if (multiplies) coopMatStoreNV(acc[i * TN + j], cs, sg * LM * LN, LN, false);
      barrier();
      if (multiplies) {
        for (uint e = gl_SubgroupInvocationID; e < LM * LN; e += gl_SubgroupSize) {
          const uint r = row0 + (wr * TM + i) * LM + e / LN, n = col0 + (wc * TN + j) * LN + e % LN;
          if (r < M && n < N) {
            c[c0 + r * N + n] = uint16_t(f32_to_f16_bits(floatBitsToUint(cs[sg * LM * LN + e])));
          }
        }
      }
      barrier();
    }
  }
}
