// The dropout mask's hash, shared by dropout.comp and the fused attention
// kernels (attention.glsl), which must drop exactly what dropout.comp would.
// Whether an element is kept is a pure function of (graph seed, global step,
// the op's key, the element's row of the global batch, its place in that
// row): a counter-based hash, the same on every device and run.

// Chris Wellons' "lowbias32" integer hash: full avalanche, cheap.
uint mix32(uint v) {
  v ^= v >> 16;
  v *= 0x7feb352du;
  v ^= v >> 15;
  v *= 0x846ca68bu;
  v ^= v >> 16;
  return v;
}

// The part of the hash that a row's elements share.
uint dropout_row_hash(uint seed, uint step, uint key, uint row) {
  uint h = mix32(seed ^ 0x9e3779b9u);
  h = mix32(h ^ step);
  h = mix32(h ^ key);
  return mix32(h ^ row);
}

// 32 bits for element `element` of the row whose dropout_row_hash is `row_hash`.
uint dropout_element_hash(uint row_hash, uint key, uint element) {
  return mix32(mix32(row_hash ^ element) + key);
}

// 32 bits for element `element` of row `row`; dropout keeps it when the
// result is >= rate * 2^32.
uint dropout_hash(uint seed, uint step, uint key, uint row, uint element) {
  return dropout_element_hash(dropout_row_hash(seed, step, key, row), key, element);
}
