// The push constants and window helpers of the pooling kernels (pool.comp,
// pool_max_grad.comp, pool_avg_grad.comp). Images are NHWC, row-major. The
// host checks every padded extent to be below 2^30, so the signed window
// arithmetic below cannot overflow.
layout(push_constant) uniform Params {
  uint n;        // invocations: output elements (forward) or input elements (backward)
  uint h, w, c;  // input height, width, channels
  uint oh, ow;   // output height, width
  uint kh, kw;   // window rows, columns
  uint sh, sw;   // strides
  uint pt, pl;   // padding before the first row, column
};

// The in-image rows [lo.x, hi.x) and columns [lo.y, hi.y) of output cell (y, x)'s window.
void window_range(uint y, uint x, out ivec2 lo, out ivec2 hi) {
  ivec2 start = ivec2(int(y * sh) - int(pt), int(x * sw) - int(pl));
  lo = max(start, ivec2(0));
  hi = min(start + ivec2(int(kh), int(kw)), ivec2(int(h), int(w)));
}

// The output rows (x) or columns (y) whose windows hold input row or column `i`:
// [first, last] of o with o * stride - pad <= i < o * stride - pad + k.
ivec2 covering(int i, uint pad, uint k, uint stride, uint count) {
  int top = i + int(pad);          // >= 0
  int low = top - int(k) + 1;      // may be negative
  int first = low <= 0 ? 0 : (low + int(stride) - 1) / int(stride);
  int last = min(top / int(stride), int(count) - 1);
  return ivec2(first, last);
}

uint x_index(uint b, uint row, uint col, uint ch) { return ((b * h + row) * w + col) * c + ch; }
uint y_index(uint b, uint row, uint col, uint ch) { return ((b * oh + row) * ow + col) * c + ch; }
