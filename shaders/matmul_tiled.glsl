// C[M,N] = op(A)[M,K] * op(B)[K,N], the variant for GPUs: a workgroup computes
// a BM x BN tile of C, stepping through k in BK-wide slabs of A and B that its
// threads stage in shared memory; each thread keeps a TM x TN register block
// (TM and TN multiples of 4). The block is made of 4 x 4 pieces: the thread's
// rows are the groups of 4 at (i4 * LY + ty) * 4 and its columns those at
// (j4 * LX + tx) * 4, so each shared-memory read is one vec4 and neighbouring
// threads read neighbouring vec4s (no bank conflicts), and neighbouring threads
// write neighbouring words of C (coalesced). Out-of-range elements are staged
// as 0, so any sizes work.
//
// Included by matmul_tiled.comp, and by conv_tiled.comp, which supplies the
// operands and the output itself (an implicit GEMM): it defines
// MATMUL_CUSTOM_OPERANDS and MATMUL_EXTRA_PARAMS (more push-constant members
// after K) and defines a_at, b_at and c_index after including this file.
// MATMUL_EPILOGUE(m, n, v), defined before the include, gives the value stored
// at C[m, n] for the sum v (the fused dense layer's bias and activation).
// MATMUL_OUTPUT_DECLARED: the includer declares binding 2 itself and defines
// MATMUL_STORE(i, v), which stores v at C's element i (matmul_half_tiled.comp
// rounds it to a half type); no split-K then.
// MATMUL_VEC4_LOADS (matmul_tiled_vec4.comp) reads A and B from global memory
// a vec4 at a time: for M, N and K multiples of 4 (and a split's KSLICE), where
// a vec4 never straddles a matrix's edge. The same products in the same
// order: the same bits as the scalar loads.
layout(local_size_x_id = 0, local_size_y_id = 1) in;  // (BN / TN, BM / TM)
layout(constant_id = 2) const uint BM = 64;
layout(constant_id = 3) const uint BN = 64;
layout(constant_id = 4) const uint BK = 16;
layout(constant_id = 5) const uint TM = 4;
layout(constant_id = 6) const uint TN = 4;
layout(constant_id = 7) const bool TRANS_A = false;
layout(constant_id = 8) const bool TRANS_B = false;
// Prefetch: two shared slabs; the next slab's global loads are issued into
// registers before the FMAs of the current one, and stored to the other slab
// after them, so memory latency hides behind arithmetic and one barrier per
// slab does. (Ids 9-14 are left to the files that include this one.)
layout(constant_id = 15) const bool PREFETCH = false;
// Split-K: SLICES > 1 splits k into slices KSLICE long (any length: a slab
// that crosses a slice's end is staged with 0 past it), the
// workgroups' z = group * SLICES + slice. Each slice's sums go to its own copy
// of C (slice * the size of C + the element's index, no epilogue), summed in
// slice order afterwards (sum_slices.comp), so a product whose output tiles
// are too few to fill the device still runs on all of it, with fixed bits.
layout(constant_id = 16) const uint SLICES = 1u;
layout(constant_id = 17) const uint KSLICE = 0u;
uint mm_group() { return gl_WorkGroupID.z / SLICES; }

#ifdef MATMUL_VEC4_LOADS
#ifdef MATMUL_CUSTOM_OPERANDS
#error "vec4 loads read the plain operands"
#endif
layout(std430, binding = 0) readonly buffer A { vec4 a4[]; };
layout(std430, binding = 1) readonly buffer B { vec4 b4[]; };
#elif defined(MATMUL_WORD_OPERANDS)
// The includer reads A and B by the word (f32, or two halves a word).
layout(std430, binding = 0) readonly buffer A { uint a_words[]; };
layout(std430, binding = 1) readonly buffer B { uint b_words[]; };
#else
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
#endif
#ifndef MATMUL_OUTPUT_DECLARED
layout(std430, binding = 2) writeonly buffer C { float c[]; };
#define MATMUL_STORE(i, v) c[i] = (v)
#endif
layout(push_constant) uniform Params {
  uint M, N, K;
#ifdef MATMUL_EXTRA_PARAMS
  MATMUL_EXTRA_PARAMS
#endif
};

const uint BM4 = BM / 4, BN4 = BN / 4, TM4 = TM / 4, TN4 = TN / 4;
const uint SLABS = PREFETCH ? 2u : 1u;
shared vec4 As[SLABS * BK * BM4];  // As[slab * BK * BM4 + k * BM4 + m / 4][m % 4]
shared vec4 Bs[SLABS * BK * BN4];  // Bs[slab * BK * BN4 + k * BN4 + n / 4][n % 4]
// Elements of a slab each invocation stages (the workgroup is (BN/TN) x (BM/TM)).
const uint THREADS = (BN / TN) * (BM / TM);
#ifdef MATMUL_VEC4_LOADS
const uint BK4 = BK / 4;
const uint A_PER = (BK * BM4 + THREADS - 1u) / THREADS;  // vec4s
const uint B_PER = (BK * BN4 + THREADS - 1u) / THREADS;
#define SLAB_REG vec4
#else
const uint A_PER = (BK * BM + THREADS - 1u) / THREADS;
const uint B_PER = (BK * BN + THREADS - 1u) / THREADS;
#define SLAB_REG float
#endif

// op(A)[m, k], op(B)[k, n] (0 outside the matrices) and where C[m, n] goes.
float a_at(uint m, uint k);
float b_at(uint k, uint n);
uint c_index(uint m, uint n);

#ifndef MATMUL_EPILOGUE
#define MATMUL_EPILOGUE(m, n, v) (v)
#endif

#if !defined(MATMUL_CUSTOM_OPERANDS) && !defined(MATMUL_VEC4_LOADS)
float a_at(uint m, uint k) {
  if (m >= M || k >= K) return 0.0;
  return TRANS_A ? a[k * M + m] : a[m * K + k];
}
float b_at(uint k, uint n) {
  if (k >= K || n >= N) return 0.0;
  return TRANS_B ? b[n * K + k] : b[k * N + n];
}
uint c_index(uint m, uint n) { return m * N + n; }
#elif defined(MATMUL_VEC4_LOADS)
uint c_index(uint m, uint n) { return m * N + n; }
#endif

// Staging: consecutive invocations take consecutive addresses of the stored
// matrix. LOAD_SLAB reads slab k of A and B into registers, STORE_SLAB writes
// them to shared slab `slab`.
#ifdef MATMUL_VEC4_LOADS
// A vec4 runs along the stored rows: k for A and m for op(A) = A^T; n for B
// and k for op(B) = B^T. One along m or n is stored whole; one along k goes
// to four rows of the slab.
#define LOAD_SLAB(k)                                                        \
  for (uint j = 0u; j < A_PER; ++j) {                                       \
    uint i = tid + j * THREADS;                                             \
    uint kk = TRANS_A ? i / BM4 : (i % BK4) * 4u;                           \
    uint mm = TRANS_A ? (i % BM4) * 4u : i / BK4;                           \
    bool ok = i < BK * BM4 && (k) + kk < kend && m0 + mm < M;               \
    pa[j] = ok ? a4[TRANS_A ? ((k) + kk) * (M / 4u) + (m0 + mm) / 4u        \
                            : (m0 + mm) * (K / 4u) + ((k) + kk) / 4u]       \
               : vec4(0.0);                                                 \
  }                                                                         \
  for (uint j = 0u; j < B_PER; ++j) {                                       \
    uint i = tid + j * THREADS;                                             \
    uint kk = TRANS_B ? (i % BK4) * 4u : i / BN4;                           \
    uint nn = TRANS_B ? i / BK4 : (i % BN4) * 4u;                           \
    bool ok = i < BK * BN4 && (k) + kk < kend && n0 + nn < N;               \
    pb[j] = ok ? b4[TRANS_B ? (n0 + nn) * (K / 4u) + ((k) + kk) / 4u        \
                            : ((k) + kk) * (N / 4u) + (n0 + nn) / 4u]       \
               : vec4(0.0);                                                 \
  }
#define STORE_SLAB(slab)                                                    \
  for (uint j = 0u; j < A_PER; ++j) {                                       \
    uint i = tid + j * THREADS;                                             \
    if (i >= BK * BM4) continue;                                            \
    uint base = (slab) * BK * BM4;                                          \
    if (TRANS_A) {                                                          \
      As[base + (i / BM4) * BM4 + i % BM4] = pa[j];                         \
    } else {                                                                \
      uint kk = (i % BK4) * 4u, mm = i / BK4;                               \
      for (uint r = 0u; r < 4u; ++r)                                        \
        As[base + (kk + r) * BM4 + mm / 4u][mm % 4u] = pa[j][r];            \
    }                                                                       \
  }                                                                         \
  for (uint j = 0u; j < B_PER; ++j) {                                       \
    uint i = tid + j * THREADS;                                             \
    if (i >= BK * BN4) continue;                                            \
    uint base = (slab) * BK * BN4;                                          \
    if (TRANS_B) {                                                          \
      uint kk = (i % BK4) * 4u, nn = i / BK4;                               \
      for (uint r = 0u; r < 4u; ++r)                                        \
        Bs[base + (kk + r) * BN4 + nn / 4u][nn % 4u] = pb[j][r];            \
    } else {                                                                \
      Bs[base + (i / BN4) * BN4 + i % BN4] = pb[j];                         \
    }                                                                       \
  }
#else
#define LOAD_SLAB(k)                                  \
  for (uint j = 0u; j < A_PER; ++j) {                 \
    uint i = tid + j * THREADS;                       \
    uint kk = TRANS_A ? i / BM : i % BK;              \
    uint mm = TRANS_A ? i % BM : i / BK;              \
    pa[j] = i < BK * BM && (k) + kk < kend ? a_at(m0 + mm, (k) + kk) : 0.0; \
  }                                                   \
  for (uint j = 0u; j < B_PER; ++j) {                 \
    uint i = tid + j * THREADS;                       \
    uint kk = TRANS_B ? i % BK : i / BN;              \
    uint nn = TRANS_B ? i / BK : i % BN;              \
    pb[j] = i < BK * BN && (k) + kk < kend ? b_at((k) + kk, n0 + nn) : 0.0; \
  }
#define STORE_SLAB(slab)                                               \
  for (uint j = 0u; j < A_PER; ++j) {                                  \
    uint i = tid + j * THREADS;                                        \
    uint kk = TRANS_A ? i / BM : i % BK;                               \
    uint mm = TRANS_A ? i % BM : i / BK;                               \
    if (i < BK * BM) As[(slab) * BK * BM4 + kk * BM4 + mm / 4u][mm % 4u] = pa[j]; \
  }                                                                    \
  for (uint j = 0u; j < B_PER; ++j) {                                  \
    uint i = tid + j * THREADS;                                        \
    uint kk = TRANS_B ? i % BK : i / BN;                               \
    uint nn = TRANS_B ? i / BK : i % BN;                               \
    if (i < BK * BN) Bs[(slab) * BK * BN4 + kk * BN4 + nn / 4u][nn % 4u] = pb[j]; \
  }
#endif

void main() {
  const uint LX = gl_WorkGroupSize.x, LY = gl_WorkGroupSize.y;
  uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  uint tid = ty * LX + tx;
  uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;

  vec4 acc[TM * TN4];  // acc[row * TN4 + j4]: the thread's row, columns j4's 4
  for (uint i = 0u; i < TM * TN4; ++i) acc[i] = vec4(0.0);
  vec4 ra[TM4], rb[TN4];
  SLAB_REG pa[A_PER], pb[B_PER];

  uint slice = gl_WorkGroupID.z % SLICES;
  uint kbeg = SLICES > 1u ? slice * KSLICE : 0u;
  uint kend = SLICES > 1u ? min(K, kbeg + KSLICE) : K;
  if (PREFETCH) {
    LOAD_SLAB(kbeg)
    STORE_SLAB(0u)
    barrier();
  }
  for (uint k0 = kbeg; k0 < kend; k0 += BK) {
    uint cur = PREFETCH ? ((k0 - kbeg) / BK) & 1u : 0u;
    bool next = PREFETCH && k0 + BK < kend;
    if (next) {
      LOAD_SLAB(k0 + BK)
    }
    if (!PREFETCH) {
      LOAD_SLAB(k0)
      STORE_SLAB(0u)
      barrier();
    }
    uint as0 = cur * BK * BM4, bs0 = cur * BK * BN4;
    for (uint kk = 0u; kk < BK; ++kk) {
      for (uint i4 = 0u; i4 < TM4; ++i4) ra[i4] = As[as0 + kk * BM4 + i4 * LY + ty];
      for (uint j4 = 0u; j4 < TN4; ++j4) rb[j4] = Bs[bs0 + kk * BN4 + j4 * LX + tx];
      for (uint i4 = 0u; i4 < TM4; ++i4)
        for (uint r = 0u; r < 4u; ++r)
          for (uint j4 = 0u; j4 < TN4; ++j4)
            acc[(i4 * 4u + r) * TN4 + j4] += ra[i4][r] * rb[j4];
    }
    if (next) {
      STORE_SLAB(cur ^ 1u)
    }
    barrier();
  }
  for (uint i4 = 0u; i4 < TM4; ++i4) {
    for (uint r = 0u; r < 4u; ++r) {
      uint m = m0 + (i4 * LY + ty) * 4u + r;
      if (m >= M) break;
      for (uint j4 = 0u; j4 < TN4; ++j4) {
        for (uint q = 0u; q < 4u; ++q) {
          uint n = n0 + (j4 * LX + tx) * 4u + q;
          if (n >= N) continue;
          float v = acc[(i4 * 4u + r) * TN4 + j4][q];
#ifndef MATMUL_OUTPUT_DECLARED
          if (SLICES > 1u) {
            c[slice * M * N * (gl_NumWorkGroups.z / SLICES) + c_index(m, n)] = v;
            continue;
          }
#endif
          MATMUL_STORE(c_index(m, n), MATMUL_EPILOGUE(m, n, v));
        }
      }
    }
  }
}
