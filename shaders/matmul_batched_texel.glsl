// The batched matmul for lavapipe: C[b] = op(A[b]) * op(B[b]) for every b of
// a rank-3 batch, on matmul_texel.glsl's kernel (its hooks, with each
// operand's batch offset added), one batch per workgroup z. Included by
// shaders/matmul_batched_texel_r<RM>c<RN4>.comp after they define RM and RN4.
//
// Each operand is one texel buffer over the whole batch, so indices past a
// matrix read the next matrix (or clamp to the buffer's last texel, as in the
// plain kernel): such values reach only outputs that are never stored, except
// along k, where matmul_texel.glsl's masks apply as before. A batch stride is
// rows x row length, so a row length in whole texels (A_ALIGNED, B_ALIGNED)
// keeps every batch's rows texel-aligned.

// batch0: the first batch of this dispatch (the batch is split into several
// dispatches past the device's workgroup-count limit in z).
#define MATMUL_EXTRA_PARAMS uint batch0;

// Element offsets of this workgroup's matrices (the push constants are
// declared in the include; the macros expand inside its main()).
#define BATCH (batch0 + gl_WorkGroupID.z)
#define A_BASE (BATCH * M * K)
#define B_BASE (BATCH * K * N)

// matmul_texel.glsl's default hooks, shifted by the batch offsets.
#define A_ROW(i, m, k0) mask_k(load_a(A_BASE + (m) * K + (k0)), k0)
#define A_COL4(i, m, k) mask_if(load_a(A_BASE + (k) * M + (m)), (k) < K)
#define B_ROW(k, n) load_b(B_BASE + (k) * N + (n))
#define B_COL(n, k0) mask_k(load_b(B_BASE + (n) * K + (k0)), k0)
#define C_INDEX(m, n) (BATCH * M * N + (m) * N + (n))

#include "matmul_texel.glsl"
