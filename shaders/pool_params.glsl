// The geometry and window helpers of the pooling kernels (pool.comp,
// pool_max_grad.comp, pool_avg_grad.comp). Images are NHWC, row-major.
//
// The geometry is specialization constants, not push constants: divisions and
// remainders by constants compile to multiplies and shifts, while on lavapipe
// a division by a run-time value is a scalar divide per lane, and the
// backward kernels' dozen of them per cell made them ~10x slower than the
// forward kernel. A pipeline per pooling geometry is cheap: models have few.
// The host checks every padded extent to be below 2^30, so the signed window
// arithmetic below cannot overflow.
layout(constant_id = 2) const uint h = 1;  // input height, width, channels
layout(constant_id = 3) const uint w = 1;
layout(constant_id = 4) const uint c = 1;
layout(constant_id = 5) const uint oh = 1;  // output height, width
layout(constant_id = 6) const uint ow = 1;
layout(constant_id = 7) const uint kh = 1;  // window rows, columns
layout(constant_id = 8) const uint kw = 1;
layout(constant_id = 9) const uint sh = 1;  // strides
layout(constant_id = 10) const uint sw = 1;
layout(constant_id = 11) const uint pt = 0;  // padding before the first row, column
layout(constant_id = 12) const uint pl = 0;

layout(push_constant) uniform Params {
  uint n;  // invocations: output elements (forward) or input elements (backward)
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
