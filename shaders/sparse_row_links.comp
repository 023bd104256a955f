#version 450
// The occurrence links of a sparse gradient's indices [k] (optimizers/
// sparse_row_links.cpp): for occurrence j of a row in [0, rows), head[j], the
// first occurrence of that row, and next[j], the next one after j (-1: none);
// an index outside [0, rows) gets head = next = -1. The lazy update then has
// each row's first occurrence walk its chain, summing the values rows in
// occurrence order: O(k) work where a scan of the indices per occurrence was
// O(k^2).
//
// Five passes over one i32 buffer (the op's output), a barrier between each:
//   0 clear the hash table (H slots, a power of two above k) and the
//     allocator;
//   1 insert each occurrence's row (open addressing, compare-and-swap) and
//     count the occurrences per slot;
//   2 give each used slot a range of `members` (an atomic allocator);
//   3 put each occurrence into its slot's range (found again by probing);
//   4 per used slot, sort its members (a heapsort: O(c log c) for a row
//     named c times, no quadratic scan when one id, padding say, fills the
//     batch) and link them in that order: head = the least, next = the
//     following member.
// The atomics decide only where a row's slot lands and the order its members
// are put in, never the links: the sort makes them the same bits run to run.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x_id = 0) in;
#include "index.glsl"

layout(std430, binding = 0) readonly buffer Ids { int ids[]; };
// head [k], next [k], members [k], then per slot (key, count, base: the start
// of its members, which pass 3 moves to their end), then the allocator.
layout(std430, binding = 1) buffer Links { int links[]; };
layout(push_constant) uniform Params {
  uint k;
  uint rows;
  uint slots;  // H, a power of two
  uint pass;
};

const int kEmpty = -1;
const int kNone = -1;

uint head_at(uint j) { return j; }
uint next_at(uint j) { return k + j; }
uint member_at(uint i) { return 2 * k + i; }
uint slot_at(uint h) { return 3 * k + 3 * h; }  // key, count, base
uint counter_at() { return 3 * k + 3 * slots; }

uint hash(int row) {
  uint x = uint(row) * 0x9E3779B1u;
  return (x ^ (x >> 15)) & (slots - 1);
}

// Moves the member at heap position `at` of members [base, base + n) down
// until it is no less than its children (a max-heap).
void sift_down(uint base, uint at, uint n) {
  int v = links[member_at(base + at)];
  for (;;) {
    uint child = 2 * at + 1;
    if (child >= n) break;
    int c = links[member_at(base + child)];
    if (child + 1 < n) {
      int r = links[member_at(base + child + 1)];
      if (r > c) {
        child += 1;
        c = r;
      }
    }
    if (c <= v) break;
    links[member_at(base + at)] = c;
    at = child;
  }
  links[member_at(base + at)] = v;
}

// Sorts the members of the row at slot word `s` ascending and links them.
void link_row(uint s) {
  uint n = uint(links[s + 1]);
  uint base = uint(links[s + 2]) - n;
  for (uint at = n / 2; at > 0; --at) sift_down(base, at - 1, n);
  for (uint end = n - 1; end > 0; --end) {
    int top = links[member_at(base)];
    links[member_at(base)] = links[member_at(base + end)];
    links[member_at(base + end)] = top;
    sift_down(base, 0, end);
  }
  int first = links[member_at(base)];
  for (uint m = 0; m < n; ++m) {
    int j = links[member_at(base + m)];
    links[head_at(uint(j))] = first;
    links[next_at(uint(j))] = m + 1 < n ? links[member_at(base + m + 1)] : kNone;
  }
}

void main() {
  uint i = linear_index();
  if (pass == 0) {
    if (i < slots) {
      uint s = slot_at(i);
      links[s] = kEmpty;
      links[s + 1] = 0;
      links[s + 2] = 0;
    }
    if (i == 0) links[counter_at()] = 0;
    return;
  }
  if (pass == 2) {
    if (i < slots && links[slot_at(i)] != kEmpty) {
      uint s = slot_at(i);
      links[s + 2] = atomicAdd(links[counter_at()], links[s + 1]);
    }
    return;
  }
  if (pass == 4) {
    if (i < slots && links[slot_at(i)] != kEmpty) link_row(slot_at(i));
    return;
  }
  if (i >= k) return;
  int row = ids[i];
  if (row < 0 || uint(row) >= rows) {
    if (pass == 1) {
      links[head_at(i)] = kNone;
      links[next_at(i)] = kNone;
    }
    return;
  }
  // At most k distinct rows in more than k slots: pass 1 always finds an
  // empty slot or the row's, and pass 3 the row's.
  uint h = hash(row);
  if (pass == 1) {
    for (;;) {
      int was = atomicCompSwap(links[slot_at(h)], kEmpty, row);
      if (was == kEmpty || was == row) break;
      h = (h + 1) & (slots - 1);
    }
    atomicAdd(links[slot_at(h) + 1], 1);
    return;
  }
  // pass 3
  while (links[slot_at(h)] != row) h = (h + 1) & (slots - 1);
  int place = atomicAdd(links[slot_at(h) + 2], 1);
  links[member_at(uint(place))] = int(i);
}
