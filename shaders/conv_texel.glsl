// conv2d and its gradients as implicit GEMMs on the texel matmul (the lavapipe
// variant, matmul_texel.glsl), included by conv_texel_<gemm>_c<RN4>.comp after
// they define CONV_GEMM (0 forward, 1 input gradient, 2 filter gradient; see
// conv_geometry.glsl) and RN4.
//
// The matmul kernel asks for 4 consecutive k of an A row at a time. Where a
// group's channels come in fours (A_VEC), those 4 k are 4 channels of one pixel
// of x (or dy): one texel fetch, as in the plain matmul. Otherwise each of the
// 4 is its own fetch. Each block row's window is worked out once before the k
// loop (ROW_SETUP) and each k step's taps once per step (K_SETUP), so the loop
// itself adds only adds, compares and a select to the matmul's work.
#define RM 16
#include "conv_params.glsl"
#define MATMUL_EXTRA_PARAMS CONV_PARAMS

const uint CONV_MODE = uint(CONV_GEMM);
// 4 consecutive k of A (4 consecutive rows m in the filter gradient), and of B
// in the input gradient, are one aligned texel.
layout(constant_id = 6) const bool A_VEC = false;
layout(constant_id = 7) const bool B_VEC = false;
// The geometry's divisors as constants (conv_geometry.glsl): the same values
// as the push constants, one pipeline per geometry.
#define CONV_CONST_DIVISORS
layout(constant_id = 8) const uint CONV_DIV_IN_H = 1u;
layout(constant_id = 9) const uint CONV_DIV_IN_W = 1u;
layout(constant_id = 10) const uint CONV_DIV_OUT_H = 1u;
layout(constant_id = 11) const uint CONV_DIV_OUT_W = 1u;
layout(constant_id = 12) const uint CONV_DIV_K_W = 1u;
layout(constant_id = 13) const uint CONV_DIV_GROUP_C = 1u;
layout(constant_id = 14) const uint CONV_DIV_GROUP_O = 1u;
layout(constant_id = 15) const int CONV_DIV_STRIDE_H = 1;
layout(constant_id = 16) const int CONV_DIV_STRIDE_W = 1;

// Worked out before the k loop, per block row (ROW_SETUP), and once per k step
// (K_SETUP), so that the loop adds only adds, compares and selects:
//   forward:         row_window = x_corner of the row's output pixel,
//                    k_tap = x_offsets of k0 .. k0 + 3;
//   input gradient:  row_window = in_pixel_window (conv_geometry.glsl),
//                    k_tap = (kh, kw, channel), kh = -1 past K;
//   filter gradient: row_window = x_offsets of the row (a filter row),
//                    k_tap = x_corner of output pixels k0 .. k0 + 3.
ivec3 row_window[RM];
ivec3 k_tap[4];

ivec3 conv_row(uint m);
void conv_k_setup(uint k0);
vec4 conv_a_row(ivec3 window);
vec4 conv_a_col4(ivec3 corner, ivec3 r0, ivec3 r1, ivec3 r2, ivec3 r3);
ivec3 x_offsets(uint r, uint limit);
vec4 conv_b_col(uint n);
uint c_at(uint m, uint n);

#define ROW_SETUP(x, r) row_window[r] = conv_row(m0 + (r));
#define K_SETUP(k0) conv_k_setup(k0)
#if CONV_GEMM == 2
#define COL_ROW(i, j) row_window[4 * ((i) % (RM / 4)) + (j)]
#define A_COL4(i, m, k) \
  conv_a_col4(k_tap[(i) / (RM / 4)], COL_ROW(i, 0), COL_ROW(i, 1), COL_ROW(i, 2), COL_ROW(i, 3))
#else
#define A_ROW(i, m, k0) conv_a_row(row_window[i])
#endif
#if CONV_GEMM == 1
#define B_COL(n, k0) conv_b_col(n)
#else
#define B_ROW(k, n) load_b((k) * out_c + gl_WorkGroupID.z * group_o + (n))
#endif
#define C_INDEX(m, n) c_at(m, n)

#include "matmul_texel.glsl"
#include "conv_geometry.glsl"

vec4 a_texel(int e) { return texelFetch(A, int(min(uint(e) >> 2, a_last))); }
// Component s of t as selects: a dynamic index into a vector becomes a trip
// through memory, lane by lane, on lavapipe.
float component(vec4 t, uint s) { return s == 0u ? t.x : s == 1u ? t.y : s == 2u ? t.z : t.w; }
float a_scalar(int e) { return e < 0 ? 0.0 : component(a_texel(e), uint(e) & 3u); }
float b_scalar(uint e) { return component(texelFetch(B, int(min(e >> 2, b_last))), e & 3u); }

// x's elements as a window corner plus a tap's offsets, so that an element
// costs an add and an unsigned compare per dimension. The corner of output
// pixel p: (its element index in x, top row, left column); past the output
// (conv_tap) a top row no tap reaches. The int arithmetic may wrap for a corner in the
// padding; an element inside x comes out exact.
ivec3 x_corner(uint p) {
  ivec3 w = out_pixel_window(p);
  return ivec3((w.x + w.y * int(in_w) + w.z) * int(in_c), w.y, w.z);
}
// The offsets of filter row r (kh, kw, channel): (kh * dil_h, kw * dil_w,
// element offset from the corner); from `limit` on a row offset no corner reaches.
ivec3 x_offsets(uint r, uint limit) {
  if (r >= limit) return ivec3(-(1 << 30), 0, 0);
  ivec3 t = split_tap(r, CONV_DIV_GROUP_C);
  int dh = t.x * dil_h, dw = t.y * dil_w;
  return ivec3(dh, dw, (dh * int(in_w) + dw) * int(in_c) + int(gl_WorkGroupID.z * group_c) + t.z);
}
int x_at(ivec3 corner, ivec3 off) {
  bool inside = uint(corner.y + off.x) < in_h && uint(corner.z + off.y) < in_w;
  return inside ? corner.x + off.z : -1;
}

ivec3 conv_row(uint m) {
  if (CONV_MODE == 0u) return x_corner(m);
  if (CONV_MODE == 1u) return in_pixel_window(m);
  return x_offsets(m, M);
}
ivec3 conv_tap(uint k) {
  if (CONV_MODE == 0u) return x_offsets(k, K);
  if (CONV_MODE == 1u) return k < K ? split_tap(k, CONV_DIV_GROUP_O) : ivec3(-1);
  return k < K ? x_corner(k) : ivec3(0, -(1 << 30), 0);
}

void conv_k_setup(uint k0) {
  k_tap[0] = conv_tap(k0);
  // Only whole texels are read (the filter gradient's 4 steps are 4 pixels).
  if (A_VEC && CONV_MODE != 2u && (CONV_MODE != 1u || B_VEC)) return;
  k_tap[1] = conv_tap(k0 + 1u);
  k_tap[2] = conv_tap(k0 + 2u);
  k_tap[3] = conv_tap(k0 + 3u);
}

// op(A)[m, k] for the block row whose window is `window` and k's tap t.
int a_row_element(ivec3 window, ivec3 t) {
  return CONV_MODE == 0u ? x_at(window, t) : dy_element(dy_tap(window, t), t);
}
vec4 conv_a_row(ivec3 window) {
  if (A_VEC) {
    int e = a_row_element(window, k_tap[0]);
    return e < 0 ? vec4(0.0) : a_texel(e);
  }
  return vec4(a_scalar(a_row_element(window, k_tap[0])), a_scalar(a_row_element(window, k_tap[1])),
              a_scalar(a_row_element(window, k_tap[2])), a_scalar(a_row_element(window, k_tap[3])));
}

// Filter gradient: op(A)[m .. m + 3, k] = the filter rows m .. m + 3 (offsets
// r0 .. r3) of output pixel k's window (corner).
vec4 conv_a_col4(ivec3 corner, ivec3 r0, ivec3 r1, ivec3 r2, ivec3 r3) {
  if (A_VEC) {
    int e = x_at(corner, r0);
    return e < 0 ? vec4(0.0) : a_texel(e);
  }
  return vec4(a_scalar(x_at(corner, r0)), a_scalar(x_at(corner, r1)), a_scalar(x_at(corner, r2)),
              a_scalar(x_at(corner, r3)));
}

// Input gradient: op(B)[k0 .. k0 + 3, n] = filter[kh, kw, n, group's o .. o + 3].
float b_col_scalar(uint n, ivec3 t) {
  if (t.x < 0) return 0.0;
  return b_scalar(((uint(t.x) * k_w + uint(t.y)) * group_c + n) * out_c +
                  gl_WorkGroupID.z * group_o + uint(t.z));
}
vec4 conv_b_col(uint n) {
  if (B_VEC) {
    ivec3 t = k_tap[0];
    uint e = ((uint(t.x) * k_w + uint(t.y)) * group_c + n) * out_c + gl_WorkGroupID.z * group_o +
             uint(t.z);
    return texelFetch(B, int(min(e >> 2, b_last)));
  }
  return vec4(b_col_scalar(n, k_tap[0]), b_col_scalar(n, k_tap[1]), b_col_scalar(n, k_tap[2]),
              b_col_scalar(n, k_tap[3]));
}
