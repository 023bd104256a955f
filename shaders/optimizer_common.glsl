// Shared by the optimizer shaders (opt_*.comp). One invocation per element of
// all the variables of one optimizer call; the segment table (written by the
// host before every run, see optimizers/apply_op.cpp) says where each
// variable, its gradient and its slots start, in floats.
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) buffer Arena { float arena[]; };  // variables and slots
layout(std430, binding = 1) readonly buffer Grads { float grads[]; };
layout(std430, binding = 2) readonly buffer Params {
  float lr;
  float h[7];  // the optimizer's values for this step
  float clip_value;
  float clip_norm;
  uint segments;
  uint total;
  // Per segment: (variable, gradient, count, first element), (slot 0, 1, 2, -).
  uvec4 seg[];
};
layout(std430, binding = 3) readonly buffer Norm { float global_norm[]; };
layout(std430, binding = 4) writeonly buffer Out { float used_lr[]; };

// Segment holding element e (segments are in element order).
uint find_segment(uint e) {
  uint lo = 0, hi = segments - 1;
  while (lo < hi) {
    uint mid = (lo + hi + 1) / 2;
    if (seg[2 * mid].w <= e) lo = mid; else hi = mid - 1;
  }
  return lo;
}

float clipped(float g) {
  if (clip_norm > 0.0) g *= clip_norm / max(global_norm[0], clip_norm);
  if (clip_value > 0.0) g = clamp(g, -clip_value, clip_value);
  return g;
}

// Each optimizer defines: void update(uint p, float g, uvec3 slot)
void update(uint p, float g, uvec3 slot);

void main() {
  uint e = gl_GlobalInvocationID.x;
  if (e == 0) used_lr[0] = lr;
  if (e >= total) return;
  uint s = find_segment(e);
  uint j = e - seg[2 * s].w;
  update(seg[2 * s].x + j, clipped(grads[seg[2 * s].y + j]), seg[2 * s + 1].xyz + uvec3(j));
}
