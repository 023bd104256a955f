// Shared by the dense optimizer shaders (opt_*.comp), over all the variables of
// one optimizer call; the segment table (written by the host before every run,
// see optimizers/apply_op.cpp) says where each variable, its gradient and its
// slots start, in floats. The update itself is shaders/opt_<name>.glsl, which
// the .comp includes after this file.
#include "optimizer_params.glsl"

// vec4 access: one buffer load moves four floats (lavapipe turns every buffer
// load into a loop over the lanes, so fewer, wider loads are much faster).
// Tensors start 16-byte aligned with their allocation padded to 16 bytes, so a
// tensor's last vec4 may run into its own padding, never into another tensor.
layout(std430, binding = 0) buffer Arena { vec4 arena[]; };  // variables and slots
layout(std430, binding = 1) readonly buffer Grads { vec4 grads[]; };
// Per segment of the table, in floats: (variable, gradient, count, first
// element), (slot 0, 1, 2, -); offsets are multiples of 4.

// How opt_<name>.glsl's update() sees the arena: vec4s.
#define T vec4
#define LD(i) arena[i]
#define ST(i, x) arena[i] = (x)

// Each optimizer defines: void update(uint p, vec4 g, uvec3 slot), p and slot
// in vec4 units.
void update(uint p, vec4 g, uvec3 slot);

// Each invocation takes a share of every segment (variable) in turn, so the
// segment's offsets are loaded once per segment, and element order within a
// variable is the order of memory.
void main() {
  uint tid = linear_index();
  uint threads = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_WorkGroupSize.x;
  if (tid == 0) used_lr[0] = lr;
  load_step_values();
  float scale = clip_norm > 0.0 ? clip_norm / max(global_norm[0], clip_norm) : 1.0;
  float limit = clip_value > 0.0 ? clip_value : 1.0 / 0.0;
  uint count = segments;
  for (uint s = 0; s < count; ++s) {
    uvec4 where = seg[2 * s] / uvec4(4, 4, 1, 1);  // floats -> vec4s for the offsets
    uvec3 slots = seg[2 * s + 1].xyz / 4;
    uint vectors = (where.z + 3) / 4;
    for (uint j = tid; j < vectors; j += threads) {
      vec4 g = clamp(grads[where.y + j] * scale, -limit, limit);
      update(where.x + j, g, slots + uvec3(j));
    }
  }
}
