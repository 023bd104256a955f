// Shared by the sparse-row optimizer shaders (opt_*_sparse.comp): the lazy
// update of the variables of one call whose gradient is sparse rows (values
// [k, D], indices [k], as an embedding lookup makes them). Only the rows named
// in indices change, parameters and slots; a row named several times gets the
// optimizer's formula once, with the sum of its values rows (in occurrence
// order) as its gradient. Indices outside [0, V) are skipped.
//
// Deterministic without float atomics: a work item is (occurrence j, block of
// up to BLOCK column units); it goes on only if j is the first occurrence of
// its index, so exactly one invocation writes each (row, block). The links
// of the indices (shaders/sparse_row_links.comp, run before) say which
// occurrence is a row's first and chain each to the next of its row, so the
// first walks its row's occurrences in order: O(k * ceil(D / (4 * BLOCK)))
// work items, each reading its row's values rows once (D % 4 == 0; for other
// widths units are floats, so ceil(D / BLOCK)).
#define SCALER_BINDING 12
#include "optimizer_params.glsl"

// Three views of the arenas: vec4 where a row's width is a multiple of 4 (its
// rows start 16-byte aligned), float otherwise, and the indices as ivec4 (the
// indices tensor starts 16-byte aligned and is padded to 16 bytes; lanes past
// k are masked).
//
// Each binding is a window of its arena, at most the device's storage-buffer
// range (optimizers/apply_window.cpp): the variable's rows, the values, the
// indices, each slot's rows and the links. One dispatch updates, of segments
// [first_segment, end_segment), the rows [first_row, V) of the first and [0,
// end_row) of the last (all rows of the others); it visits every occurrence
// of its segments, so each (row, block) still has one writer, and the sum of
// a row's values runs in occurrence order whatever the split.
layout(std430, binding = 0) buffer Arena { vec4 arena[]; };
layout(std430, binding = 1) readonly buffer Grads { vec4 grads[]; };
layout(std430, binding = 5) buffer Arena1 { float arena1[]; };
layout(std430, binding = 6) readonly buffer Grads1 { float grads1[]; };
layout(std430, binding = 7) readonly buffer Ids { ivec4 ids4[]; };
layout(std430, binding = 8) buffer Slot0 { vec4 slot0[]; };
layout(std430, binding = 9) buffer Slot1 { vec4 slot1[]; };
layout(std430, binding = 10) buffer Slot2 { vec4 slot2[]; };
// Per occurrence j of each segment: head [k] (its row's first occurrence),
// then next [k] (the next occurrence of its row, -1 after the last).
layout(std430, binding = 11) readonly buffer Links { int links[]; };
layout(push_constant) uniform Window {
  uint first_segment, end_segment, first_row, end_row;
  // floats of the arena before each window (multiples of 4)
  uint var_base, values_base, ids_base, slot0_base, slot1_base, slot2_base;
  uint links_base;  // words of the links' buffer before its window
};
// Per segment of the table, in 4-byte units from the arena's start: (variable,
// values, indices, k), (rows V, width D, blocks per occurrence, links), (slot
// 0, 1, 2, -). main() makes them relative to the windows.

uvec3 slot_base() { return uvec3(slot0_base, slot1_base, slot2_base); }

// Column units (vec4 or float) per work item: a work item reads its
// occurrence's index and links whatever its row, so wider blocks mean fewer
// such reads per row updated.
const uint BLOCK = 16;

void update(uint p, vec4 g, uvec3 slot);   // p, slot in vec4 units
void update(uint p, float g, uvec3 slot);  // p, slot in floats

float SCALE;  // clip by global norm
float LIMIT;  // clip by value

// Sums the values rows of every occurrence of `row` from its first, `occ`, on
// (in order, along the links at `next`), columns [c0, c1) in vec4s, and
// applies the update to them.
void apply_vec4(uvec4 a, uvec4 b, uvec3 slots, uint next, uint occ, int row, uint c0) {
  uint units = b.y / 4;
  uint c1 = min(c0 + BLOCK, units);
  vec4 acc[BLOCK];
  for (uint c = 0; c < BLOCK; ++c) acc[c] = vec4(0.0);
  for (int j = int(occ); j >= 0; j = links[next + uint(j)]) {
    uint from = a.y / 4 + uint(j) * units;
    for (uint c = c0; c < c1; ++c) acc[c - c0] += grads[from + c];
  }
  uint at = uint(row) * units;
  for (uint c = c0; c < c1; ++c) {
    vec4 g = clamp(acc[c - c0] * INV_SCALE * SCALE, -LIMIT, LIMIT);
    update(a.x / 4 - var_base / 4 + at + c, g, slots / 4 - slot_base() / 4 + uvec3(at + c));
  }
}

// The same in floats, for widths that are not a multiple of 4.
void apply_float(uvec4 a, uvec4 b, uvec3 slots, uint next, uint occ, int row, uint c0) {
  uint units = b.y;
  uint c1 = min(c0 + BLOCK, units);
  float acc[BLOCK];
  for (uint c = 0; c < BLOCK; ++c) acc[c] = 0.0;
  for (int j = int(occ); j >= 0; j = links[next + uint(j)]) {
    uint from = a.y + uint(j) * units;
    for (uint c = c0; c < c1; ++c) acc[c - c0] += grads1[from + c];
  }
  uint at = uint(row) * units;
  for (uint c = c0; c < c1; ++c) {
    float g = clamp(acc[c - c0] * INV_SCALE * SCALE, -LIMIT, LIMIT);
    update(a.x - var_base + at + c, g, slots - slot_base() + uvec3(at + c));
  }
}

void main() {
  uint tid = linear_index();
  uint threads = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_WorkGroupSize.x;
  if (tid == 0) used_lr[0] = lr;
  load_step_values();
  if (skip_step()) return;
  SCALE = clip_norm > 0.0 ? clip_norm / max(unscaled_global_norm(), clip_norm) : 1.0;
  LIMIT = clip_value > 0.0 ? clip_value : 1.0 / 0.0;
  for (uint s = first_segment; s < end_segment; ++s) {
    // Values and indices windows hold them whole; the variable's and slots'
    // may start past the variable's start, so apply_*() subtract those bases
    // in their own units (the differences wrap around, the sums do not).
    uvec4 a = seg[3 * s] - uvec4(0, values_base, ids_base, 0);
    uvec4 b = seg[3 * s + 1];
    uvec3 slots = seg[3 * s + 2].xyz;
    uint lo = s == first_segment ? first_row : 0;
    uint hi = s + 1 == end_segment ? end_row : b.x;
    uint head = b.w - links_base;
    uint next = head + a.w;
    uint items = a.w * b.z;
    for (uint w = tid; w < items; w += threads) {
      uint occ = w / b.z;
      int row = ids4[a.z / 4 + occ / 4][occ % 4];
      if (row < 0 || uint(row) < lo || uint(row) >= hi || links[head + occ] != int(occ)) continue;
      if (b.y % 4 == 0) {
        apply_vec4(a, b, slots, next, occ, row, (w % b.z) * BLOCK);
      } else {
        apply_float(a, b, slots, next, occ, row, (w % b.z) * BLOCK);
      }
    }
  }
}
