#version 450
#extension GL_GOOGLE_include_directive : require
// Average-pooling backward, gathered: one invocation per input cell sums
// dy / count over the windows that hold it (count: the window's cells inside
// the image, as pool.comp divided by), in ascending window order.
layout(local_size_x_id = 0) in;
#include "index.glsl"

layout(std430, binding = 0) readonly buffer DY { float dy[]; };
layout(std430, binding = 1) writeonly buffer DX { float dx[]; };
#include "pool_params.glsl"

void main() {
  uint i = linear_index();
  if (i >= n) return;
  uint ch = i % c;
  uint r = i / c;
  int col = int(r % w);
  r /= w;
  int row = int(r % h);
  uint b = r / h;
  ivec2 rows = covering(row, pt, kh, sh, oh);
  ivec2 cols = covering(col, pl, kw, sw, ow);
  float sum = 0.0;
  for (int o = rows.x; o <= rows.y; ++o) {
    for (int p = cols.x; p <= cols.y; ++p) {
      ivec2 lo, hi;
      window_range(uint(o), uint(p), lo, hi);
      sum += dy[y_index(b, uint(o), uint(p), ch)] / float((hi.x - lo.x) * (hi.y - lo.y));
    }
  }
  dx[i] = sum;
}
