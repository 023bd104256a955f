// Shared by the dense optimizer shaders (opt_*.comp), over all the variables of
// one optimizer call; the segment table (written by the host before every run,
// see optimizers/apply_op.cpp) says where each variable, its gradient and its
// slots start, in floats. The update itself is shaders/opt_<name>.glsl, which
// the .comp includes after this file.
#define SCALER_BINDING 8
#include "optimizer_params.glsl"

// vec4 access: one buffer load moves four floats (lavapipe turns every buffer
// load into a loop over the lanes, so fewer, wider loads are much faster).
// Tensors start 16-byte aligned with their allocation padded to 16 bytes, so a
// tensor's last vec4 may run into its own padding, never into another tensor.
//
// Each binding is a window of its arena, at most the device's storage-buffer
// range (optimizers/apply_window.cpp): the variables', the gradients' and each
// slot's. A variable and its slots lie far apart in the variable arena, hence a
// window (binding) for each. One dispatch updates the elements of segments
// [first_segment, end_segment): the first from first_vector, the last up to
// end_vector (vec4s); the others whole.
layout(std430, binding = 0) buffer Arena { vec4 arena[]; };  // variables
layout(std430, binding = 1) readonly buffer Grads { vec4 grads[]; };
layout(std430, binding = 5) buffer Slot0 { vec4 slot0[]; };
layout(std430, binding = 6) buffer Slot1 { vec4 slot1[]; };
layout(std430, binding = 7) buffer Slot2 { vec4 slot2[]; };
layout(push_constant) uniform Window {
  uint first_segment, end_segment, first_vector, end_vector;
  // vec4s of the arena before each window (subtracted from the table's offsets)
  uint var_base, grad_base, slot0_base, slot1_base, slot2_base;
};
// Per segment of the table, in floats from the arena's start: (variable,
// gradient, count, first element), (slot 0, 1, 2, -); offsets are multiples of 4.

// How opt_<name>.glsl's update() sees the windows: vec4s.
#define T vec4
#define LD(i) arena[i]
#define ST(i, x) arena[i] = (x)
#define LD0(i) slot0[i]
#define ST0(i, x) slot0[i] = (x)
#define LD1(i) slot1[i]
#define ST1(i, x) slot1[i] = (x)
#define LD2(i) slot2[i]
#define ST2(i, x) slot2[i] = (x)

// Each optimizer defines: void update(uint p, vec4 g, uvec3 slot), p and slot
// in vec4 units of their windows.
void update(uint p, vec4 g, uvec3 slot);

// Each invocation takes a share of every segment (variable) in turn, so the
// segment's offsets are loaded once per segment, and element order within a
// variable is the order of memory.
void main() {
  uint tid = linear_index();
  uint threads = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_WorkGroupSize.x;
  if (tid == 0) used_lr[0] = lr;
  load_step_values();
  if (skip_step()) return;
  float norm = clip_norm > 0.0 ? unscaled_global_norm() : 0.0;
  float scale = clip_norm > 0.0 ? clip_norm / max(norm, clip_norm) : 1.0;
  float limit = clip_value > 0.0 ? clip_value : 1.0 / 0.0;
  uvec3 slot_base = uvec3(slot0_base, slot1_base, slot2_base);
  for (uint s = first_segment; s < end_segment; ++s) {
    uvec4 where = seg[2 * s] / uvec4(4, 4, 1, 1);  // floats -> vec4s for the offsets
    uvec3 slots = seg[2 * s + 1].xyz / 4 - slot_base;
    uint p = where.x - var_base, q = where.y - grad_base;
    uint from = s == first_segment ? first_vector : 0;
    uint to = s + 1 == end_segment ? end_vector : (where.z + 3) / 4;
    for (uint j = from + tid; j < to; j += threads) {
      vec4 g = clamp(grads[q + j] * INV_SCALE * scale, -limit, limit);
      update(p + j, g, slots + uvec3(j));
    }
  }
}
