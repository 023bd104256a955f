#version 450
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_NV_cooperative_matrix : require
// The device's tensor-core roof (bench/device_roof.cpp): each subgroup steps
// CHAINS independent LM x LN f32 accumulators by LM x LK times LK x LN f16
// products (VK_NV_cooperative_matrix), held in registers. One accumulator per
// subgroup is stored so that the compiler cannot drop the work; which
// subgroup's store lands does not matter.
// FLOPs per subgroup: iterations * CHAINS * 2 * LM * LN * LK.
layout(local_size_x_id = 0) in;
layout(constant_id = 3) const uint LM = 16;
layout(constant_id = 4) const uint LN = 8;
layout(constant_id = 5) const uint LK = 16;
layout(constant_id = 6) const uint CHAINS = 4;  // 1..8

layout(std430, binding = 0) writeonly buffer Out { float result[]; };
layout(push_constant) uniform Params {
  uint iterations;
};

#define ACC fcoopmatNV<32, gl_ScopeSubgroup, LM, LN>
#define STEP(x) x = coopMatMulAddNV(a, b, x)

void main() {
  // Small values: the accumulators grow by iterations * LK / 2^20 at most.
  fcoopmatNV<16, gl_ScopeSubgroup, LM, LK> a = fcoopmatNV<16, gl_ScopeSubgroup, LM, LK>(float16_t(1.0 / 1024.0));
  fcoopmatNV<16, gl_ScopeSubgroup, LK, LN> b = fcoopmatNV<16, gl_ScopeSubgroup, LK, LN>(float16_t(1.0 / 1024.0));
  ACC c0 = ACC(0.0), c1 = ACC(0.0), c2 = ACC(0.0), c3 = ACC(0.0);
  ACC c4 = ACC(0.0), c5 = ACC(0.0), c6 = ACC(0.0), c7 = ACC(0.0);
  for (uint i = 0u; i < iterations; ++i) {
    STEP(c0);
    if (CHAINS > 1) STEP(c1);
    if (CHAINS > 2) STEP(c2);
    if (CHAINS > 3) STEP(c3);
    if (CHAINS > 4) STEP(c4);
    if (CHAINS > 5) STEP(c5);
    if (CHAINS > 6) STEP(c6);
    if (CHAINS > 7) STEP(c7);
  }
  for (uint k = 0u; k < c0.length(); ++k) {
    c0[k] += c1[k] + c2[k] + c3[k] + c4[k] + c5[k] + c6[k] + c7[k];
  }
  const uint slot = (gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID) % 64u;
  coopMatStoreNV(c0, result, slot * LM * LN, LN, false);
}
