#version 450
#extension GL_GOOGLE_include_directive : require
// Max-pooling backward, gathered: one invocation per input cell sums, in
// ascending window order, dy of the windows whose maximum it is. A cell is a
// window's maximum when it equals the forward output y and no earlier cell of
// the window (row-major) does, as pool.comp chose it. No atomics, so the sum
// has the same order and the same bits on every run.
layout(local_size_x_id = 0) in;
#include "index.glsl"

layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Y { float y[]; };
layout(std430, binding = 2) readonly buffer DY { float dy[]; };
layout(std430, binding = 3) writeonly buffer DX { float dx[]; };
#include "pool_params.glsl"

// Whether a cell before (row, col) in window (o, p)'s row-major order holds `m`.
bool earlier_holds(uint b, uint o, uint p, uint ch, int row, int col, float m) {
  ivec2 lo, hi;
  window_range(o, p, lo, hi);
  for (int u = lo.x; u <= row; ++u) {
    int end = u < row ? hi.y : col;
    for (int v = lo.y; v < end; ++v) {
      if (x[x_index(b, uint(u), uint(v), ch)] == m) return true;
    }
  }
  return false;
}

void main() {
  uint i = linear_index();
  if (i >= n) return;
  uint ch = i % c;
  uint r = i / c;
  int col = int(r % w);
  r /= w;
  int row = int(r % h);
  uint b = r / h;
  float value = x[i];
  ivec2 rows = covering(row, pt, kh, sh, oh);
  ivec2 cols = covering(col, pl, kw, sw, ow);
  float sum = 0.0;
  for (int o = rows.x; o <= rows.y; ++o) {
    for (int p = cols.x; p <= cols.y; ++p) {
      uint j = y_index(b, uint(o), uint(p), ch);
      if (value == y[j] && !earlier_holds(b, uint(o), uint(p), ch, row, col, value)) sum += dy[j];
    }
  }
  dx[i] = sum;
}
