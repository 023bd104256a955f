#version 450
// The filter of conv2d's input gradient as a forward convolution (stride 1):
// w' [kh, kw, og, g * Cg + c] = w [KH - 1 - kh, KW - 1 - kw, c, g * Og + og],
// the taps turned around and each group's input and output channels swapped.
#extension GL_GOOGLE_include_directive : require
#include "index.glsl"
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer W { float w[]; };
layout(std430, binding = 1) writeonly buffer Flipped { float flipped[]; };
layout(push_constant) uniform Params {
  uint n;  // elements
  uint k_h, k_w, group_c, group_o, in_c, out_c;
};

void main() {
  uint e = linear_index();
  if (e >= n) return;
  // e over [k_h, k_w, group_o, in_c]
  uint oc = e % in_c, t = e / in_c;
  uint og = t % group_o;
  t /= group_o;
  uint kw = t % k_w, kh = t / k_w;
  uint g = oc / group_c, c = oc % group_c;
  uint tap = (k_h - 1u - kh) * k_w + (k_w - 1u - kw);
  flipped[e] = w[(tap * group_c + c) * out_c + g * group_o + og];
}
