// Where the implicit GEMMs of a convolution find their elements (included after
// the matmul body, which declares the push constants of conv_params.glsl).
// CONV_MODE: 0 forward, 1 gradient wrt the input, 2 gradient wrt the filter:
//   0: y [P, O]       = im2col(x) [P, T*Cg]       x filter [T*Cg, O]
//   1: dx [Q, C]      = dy view [Q, T*Og]         x filter view [T*Og, Cg]
//   2: dfilter [T*Cg, O] = im2col(x)^T [T*Cg, P]  x dy [P, O]
// with P output pixels, Q input pixels, T = k_h * k_w taps, per group (z).
// The build checks every element index fits an int.
//
// The divisors below (CONV_DIV_*) are the push constants unless the includer
// defines CONV_CONST_DIVISORS and declares them as specialization constants:
// lavapipe divides by a run-time value one lane at a time, while a division by
// a constant becomes a multiply and a shift, and the k loop divides at every step.
// CONV_GROUP: the group this workgroup works on (the tiled kernel's z also
// counts split-K slices, matmul_tiled.glsl).
#ifndef CONV_GROUP
#define CONV_GROUP gl_WorkGroupID.z
#endif

#ifndef CONV_CONST_DIVISORS
#define CONV_DIV_IN_H in_h
#define CONV_DIV_IN_W in_w
#define CONV_DIV_OUT_H out_h
#define CONV_DIV_OUT_W out_w
#define CONV_DIV_K_W k_w
#define CONV_DIV_GROUP_C group_c
#define CONV_DIV_GROUP_O group_o
#define CONV_DIV_STRIDE_H stride_h
#define CONV_DIV_STRIDE_W stride_w
#endif

// k = (tap, channel) split into (kh, kw, channel) for `inner` channels.
ivec3 split_tap(uint k, uint inner) {
  uint c = k % inner, t = k / inner;
  return ivec3(int(t / CONV_DIV_K_W), int(t % CONV_DIV_K_W), int(c));
}

// Output pixel `p` as (first pixel of its image in x, top row, left column) of its window.
ivec3 out_pixel_window(uint p) {
  uint ow = p % CONV_DIV_OUT_W, t = p / CONV_DIV_OUT_W;
  uint oh = t % CONV_DIV_OUT_H, b = t / CONV_DIV_OUT_H;
  return ivec3(int(b * in_h * in_w), int(oh) * stride_h - pad_top, int(ow) * stride_w - pad_left);
}

// Input pixel `q` as (first pixel of its image in dy, padded row, padded column).
ivec3 in_pixel_window(uint q) {
  uint w = q % CONV_DIV_IN_W, t = q / CONV_DIV_IN_W;
  uint h = t % CONV_DIV_IN_H, b = t / CONV_DIV_IN_H;
  return ivec3(int(b * out_h * out_w), int(h) + pad_top, int(w) + pad_left);
}

// The pixel of x that window `win` (out_pixel_window) reads at tap t, or -1 in
// the padding (and for t.x < 0, a k past K).
int x_tap(ivec3 win, ivec3 t) {
  int ih = win.y + t.x * dil_h, iw = win.z + t.y * dil_w;
  if (t.x < 0 || ih < 0 || ih >= int(in_h) || iw < 0 || iw >= int(in_w)) return -1;
  return win.x + ih * int(in_w) + iw;
}

// The pixel of dy whose window covers input pixel `win` (in_pixel_window) at
// tap t, or -1 where none does (the stride skips it, or it lies in the padding).
int dy_tap(ivec3 win, ivec3 t) {
  int th = win.y - t.x * dil_h, tw = win.z - t.y * dil_w;
  if (t.x < 0 || th < 0 || tw < 0 || th % CONV_DIV_STRIDE_H != 0 || tw % CONV_DIV_STRIDE_W != 0)
    return -1;
  th /= CONV_DIV_STRIDE_H;
  tw /= CONV_DIV_STRIDE_W;
  if (th >= int(out_h) || tw >= int(out_w)) return -1;
  return win.x + th * int(out_w) + tw;
}

// Element index into x (or dy) of channel t.z of this group at `pixel`, -1 kept.
int x_element(int pixel, ivec3 t) {
  return pixel < 0 ? -1 : pixel * int(in_c) + int(CONV_GROUP * group_c) + t.z;
}
int dy_element(int pixel, ivec3 t) {
  return pixel < 0 ? -1 : pixel * int(out_c) + int(CONV_GROUP * group_o) + t.z;
}

// op(A)[m, k] as an element index of A, -1 for a 0 (padding).
int a_index(uint m, uint k) {
  if (CONV_MODE == 0u) {
    ivec3 t = split_tap(k, CONV_DIV_GROUP_C);
    return x_element(x_tap(out_pixel_window(m), t), t);
  }
  if (CONV_MODE == 1u) {
    ivec3 t = split_tap(k, CONV_DIV_GROUP_O);
    return dy_element(dy_tap(in_pixel_window(m), t), t);
  }
  ivec3 t = split_tap(m, CONV_DIV_GROUP_C);
  return x_element(x_tap(out_pixel_window(k), t), t);
}

// op(B)[k, n] as an element index of B: the filter's rows (0), the filter read
// as [taps * Og, Cg] (1), dy's rows (2).
uint b_index(uint k, uint n) {
  uint z = CONV_GROUP;
  if (CONV_MODE == 1u) {
    ivec3 t = split_tap(k, CONV_DIV_GROUP_O);
    return ((uint(t.x) * k_w + uint(t.y)) * group_c + n) * out_c + z * group_o + uint(t.z);
  }
  return k * out_c + z * group_o + n;
}

uint c_at(uint m, uint n) {
  uint z = CONV_GROUP;
  return CONV_MODE == 1u ? m * in_c + z * group_c + n : m * out_c + z * group_o + n;
}
