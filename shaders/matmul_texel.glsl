// C[M,N] = op(A)[M,K] * op(B)[K,N], the matmul variant for lavapipe,
// included by shaders/matmul_texel_r<RM>c<RN4>.comp after they define RM (rows
// per block: 8 or 16) and RN4 (column texels per lane: 1, 2 or 4).
//
// On lavapipe an SSBO or shared-memory load becomes a scalar loop over the 8 lanes,
// while a texel fetch is one call that gathers 16 bytes per lane. So A and B
// are read as RGBA32F texels, 4 k at a time. A workgroup of 8 invocations
// (one SIMD row of lavapipe) computes RM rows x 8 * 4 RN4 columns: each lane
// keeps an RM x 4 RN4 register block, fetches the B texels of its own
// columns, and fetches the block's A texels at addresses shared by every lane.
// For outputs of at most 16 columns (LANES_N = 4) the workgroup is two blocks
// of 4 lanes, each RM rows x 16 columns, one below the other.
// (Handing A out with subgroupBroadcast was measured slower here: this Mesa
// implements each broadcast component as a loop over the lanes.)
//
// Any sizes work: texel indices are clamped to the bound range, so reads stay
// inside it; values read past a row or the matrix only reach outputs that are
// never stored, except along k, where the last partial step of 4 masks them
// with a select (padding may hold NaN, so multiplying by 0 would not do).
//
// An includer may supply the operands and the output itself (the implicit
// GEMMs of conv_texel.glsl) by defining, before including this file:
//   MATMUL_EXTRA_PARAMS   more push-constant members, after b_last
//   A_ROW(i, m, k0)       op(A)[m, k0 .. k0 + 3], 0 past K (i: the block row)
//   A_COL4(i, m, k)       op(A)[m .. m + 3, k], 0 past K (TRANS_A; i: the block texel)
//   B_ROW(k, n)           op(B)[k, n .. n + 3] (rows past K are masked here)
//   B_COL(n, k0)          op(B)[k0 .. k0 + 3, n], 0 past K (TRANS_B)
//   C_INDEX(m, n)         where C[m, n] goes; C[m, n + 1] follows it
//   ROW_SETUP(x, r)       per block row, once before the k loop
//   K_SETUP(k0)           at the start of every k step
//   MATMUL_EPILOGUE(m, n, v)  the vec4 stored at C[m, n .. n + 3] for the sums v
//                         (the fused dense layer's bias and activation)
//   STORE_SETUP(n)        once per chunk of columns n .. n + 3, before its rows'
//                         epilogues (what depends on the columns alone: the bias)
//   AFTER_STORE(m0, n_lane, n_stride)  once the block is stored (C is then
//                         read-write: C_READ defined), for a second pass over it
// The functions they call may be declared before and defined after the include.
//
// Every array index is a constant: lavapipe keeps constant-indexed arrays in
// registers but spills dynamically indexed ones to memory, accessed lane by
// lane, and it does not unroll loops bounded by specialization constants.
// Hence preprocessor-unrolled code, one shader per register block shape:
// specialization constants would leave every unused row in the SPIR-V, which
// Mesa then spends 100+ ms per pipeline removing.

layout(local_size_x_id = 0) in;  // 8 lanes: lavapipe's SIMD width
// Lanes side by side along N: 8, or 4 for outputs of at most 16 columns, the
// other 4 lanes then taking the next RM rows (runtime/graph/ops/texel_view.h).
layout(constant_id = 1) const uint LANES_N = 8u;
layout(constant_id = 2) const bool TRANS_A = false;
layout(constant_id = 3) const bool TRANS_B = false;
// Row lengths of the stored A and B are multiples of 4: every fetch is one
// texel. Otherwise 4 consecutive elements may straddle two texels.
layout(constant_id = 4) const bool A_ALIGNED = true;
layout(constant_id = 5) const bool B_ALIGNED = true;

layout(binding = 0) uniform samplerBuffer A;
layout(binding = 1) uniform samplerBuffer B;
#ifdef C_READ
layout(std430, binding = 2) buffer C { float c[]; };
#else
layout(std430, binding = 2) writeonly buffer C { float c[]; };
#endif
layout(push_constant) uniform Params {
  uint M, N, K;
  uint a_last, b_last;  // last valid texel index of each view
#ifdef MATMUL_EXTRA_PARAMS
  MATMUL_EXTRA_PARAMS
#endif
};

vec4 shift4(vec4 x, vec4 y, uint s) {
  return s == 0u ? x : s == 1u ? vec4(x.yzw, y.x) : s == 2u ? vec4(x.zw, y.xy) : vec4(x.w, y.xyz);
}

// The 4 consecutive elements from element e of A (of B).
vec4 load_a(uint e) {
  uint t = e >> 2;
  vec4 x = texelFetch(A, int(min(t, a_last)));
  if (A_ALIGNED) return x;
  return shift4(x, texelFetch(A, int(min(t + 1u, a_last))), e & 3u);
}
vec4 load_b(uint e) {
  uint t = e >> 2;
  vec4 x = texelFetch(B, int(min(t, b_last)));
  if (B_ALIGNED) return x;
  return shift4(x, texelFetch(B, int(min(t + 1u, b_last))), e & 3u);
}

// Keeps the components whose k is below K.
vec4 mask_k(vec4 v, uint k0) {
  return mix(vec4(0.0), v, lessThan(uvec4(k0) + uvec4(0, 1, 2, 3), uvec4(K)));
}
vec4 mask_if(vec4 v, bool keep) { return keep ? v : vec4(0.0); }

#ifndef A_ROW
#define A_ROW(i, m, k0) mask_k(load_a((m) * K + (k0)), k0)
#endif
#ifndef A_COL4
#define A_COL4(i, m, k) mask_if(load_a((k) * M + (m)), (k) < K)
#endif
#ifndef B_ROW
#define B_ROW(k, n) load_b((k) * N + (n))
#endif
#ifndef B_COL
#define B_COL(n, k0) mask_k(load_b((n) * K + (k0)), k0)
#endif
#ifndef C_INDEX
#define C_INDEX(m, n) ((m) * N + (n))
#endif
#ifndef MATMUL_EPILOGUE
#define MATMUL_EPILOGUE(m, n, v) (v)
#endif

vec4 acc[RM * RN4];  // acc[r * RN4 + q]: row m0 + r, columns of chunk q
vec4 v[RM];          // the A block's texels
vec4 ar[RM];         // ar[r] = op(A)[m0 + r, k0 .. k0 + 3]

#define FOR4(OP, q, o) OP(q, (o + 0)) OP(q, (o + 1)) OP(q, (o + 2)) OP(q, (o + 3))
#if RM == 8
#define FOR_ROWS(OP, q) FOR4(OP, q, 0) FOR4(OP, q, 4)
#elif RM == 16
#define FOR_ROWS(OP, q) FOR4(OP, q, 0) FOR4(OP, q, 4) FOR4(OP, q, 8) FOR4(OP, q, 12)
#else
#error RM must be 8 or 16
#endif
#if RN4 == 1
#define FOR_CHUNKS(OP) OP(0)
#elif RN4 == 2
#define FOR_CHUNKS(OP) OP(0) OP(1)
#elif RN4 == 4
#define FOR_CHUNKS(OP) OP(0) OP(1) OP(2) OP(3)
#else
#error RN4 must be 1, 2 or 4
#endif

// Texel i of the A block:
//   A [M, K]: row m0 + i, k0 .. k0 + 3.
//   A [K, M]: k0 + i / (RM / 4), rows m0 + 4 (i % (RM / 4)) .. + 3.
#define FETCH_A(x, i)                                                               \
  if (!TRANS_A) {                                                                   \
    v[i] = A_ROW(i, m0 + (i), k0);                                                  \
  } else {                                                                          \
    uint k = k0 + (i) / (RM / 4);                                                   \
    v[i] = A_COL4(i, m0 + 4u * ((i) % (RM / 4)), k);                                \
  }
#define ROW_OF_V(x, r) ar[r] = v[r];
#define ROW_OF_VT(x, r)                                                                   \
  ar[r] = vec4(v[0 * (RM / 4) + (r) / 4][(r) % 4], v[1 * (RM / 4) + (r) / 4][(r) % 4], \
               v[2 * (RM / 4) + (r) / 4][(r) % 4], v[3 * (RM / 4) + (r) / 4][(r) % 4]);

// Outer products: b0..b3 are rows k0 .. k0 + 3 of B at 4 columns.
#define OUTER(q, r)                                                                       \
  acc[(r) * RN4 + (q)] =                                                                  \
      fma(vec4(ar[r].w), b3,                                                              \
          fma(vec4(ar[r].z), b2, fma(vec4(ar[r].y), b1, fma(vec4(ar[r].x), b0, acc[(r) * RN4 + (q)]))));
// B stored [N, K]: b0..b3 hold k0 .. k0 + 3 of 4 columns; dot products.
#define DOTS(q, r) \
  acc[(r) * RN4 + (q)] += vec4(dot(ar[r], b0), dot(ar[r], b1), dot(ar[r], b2), dot(ar[r], b3));

#define CHUNK(q)                                                \
  {                                                             \
    uint n = n_lane + (q) * n_stride;                           \
    vec4 b0, b1, b2, b3;                                        \
    if (!TRANS_B) {                                             \
      b0 = B_ROW(k0, n);                                        \
      b1 = mask_if(B_ROW(k0 + 1u, n), k0 + 1u < K);             \
      b2 = mask_if(B_ROW(k0 + 2u, n), k0 + 2u < K);             \
      b3 = mask_if(B_ROW(k0 + 3u, n), k0 + 3u < K);             \
      FOR_ROWS(OUTER, q)                                        \
    } else {                                                    \
      b0 = B_COL(n, k0);                                        \
      b1 = B_COL(n + 1u, k0);                                   \
      b2 = B_COL(n + 2u, k0);                                   \
      b3 = B_COL(n + 3u, k0);                                   \
      FOR_ROWS(DOTS, q)                                         \
    }                                                           \
  }

#define ZERO(q, r) acc[(r) * RN4 + (q)] = vec4(0.0);
#define ZERO_CHUNK(q) FOR_ROWS(ZERO, q)
#define STORE(q, r)                                                 \
  if (m0 + (r) < M) {                                               \
    uint n = n_lane + (q) * n_stride;                               \
    uint o = C_INDEX(m0 + (r), n);                                  \
    vec4 s = MATMUL_EPILOGUE(m0 + (r), n, acc[(r) * RN4 + (q)]);    \
    if (n < N) c[o] = s.x;                                          \
    if (n + 1u < N) c[o + 1u] = s.y;                                \
    if (n + 2u < N) c[o + 2u] = s.z;                                \
    if (n + 3u < N) c[o + 3u] = s.w;                                \
  }
#ifndef STORE_SETUP
#define STORE_SETUP(n)
#endif
#define STORE_CHUNK(q)                      \
  {                                         \
    STORE_SETUP(n_lane + (q) * n_stride)    \
    FOR_ROWS(STORE, q)                      \
  }

void main() {
  uint lane = gl_LocalInvocationID.x;
  uint m0 = (gl_WorkGroupID.y * (gl_WorkGroupSize.x / LANES_N) + lane / LANES_N) * RM;
  // Chunk q of this lane: columns n_lane + q * n_stride .. + 3. Lanes sit
  // side by side, so one gather reads neighbouring texels.
  uint n_stride = 4u * LANES_N;
  uint n_lane = gl_WorkGroupID.x * RN4 * n_stride + 4u * (lane % LANES_N);
  FOR_CHUNKS(ZERO_CHUNK)
#ifdef ROW_SETUP
  FOR_ROWS(ROW_SETUP, 0)
#endif
  // The masks cost a few selects per step; keeping the last partial step in
  // the loop (instead of a copy after it) halves the code to compile.
  for (uint k0 = 0u; k0 < K; k0 += 4u) {
#ifdef K_SETUP
    K_SETUP(k0);
#endif
    FOR_ROWS(FETCH_A, 0)
    if (!TRANS_A) {
      FOR_ROWS(ROW_OF_V, 0)
    } else {
      FOR_ROWS(ROW_OF_VT, 0)
    }
    FOR_CHUNKS(CHUNK)
  }
  FOR_CHUNKS(STORE_CHUNK)
#ifdef AFTER_STORE
  AFTER_STORE(m0, n_lane, n_stride);
#endif
}
