// A row's 64 partial values combined by a fixed tree in shared memory (the
// row kernels: one workgroup of ROW_LANES per row). Every invocation of the
// workgroup calls these together; each returns the whole row's result to all.
const uint ROW_LANES = 64u;
shared float row_part[ROW_LANES];

float row_max(float v) {
  uint lane = gl_LocalInvocationID.x;
  row_part[lane] = v;
  barrier();
  for (uint s = ROW_LANES / 2u; s > 0u; s >>= 1u) {
    if (lane < s) row_part[lane] = max(row_part[lane], row_part[lane + s]);
    barrier();
  }
  float result = row_part[0];
  barrier();  // before the next call writes row_part
  return result;
}

float row_sum(float v) {
  uint lane = gl_LocalInvocationID.x;
  row_part[lane] = v;
  barrier();
  for (uint s = ROW_LANES / 2u; s > 0u; s >>= 1u) {
    if (lane < s) row_part[lane] = row_part[lane] + row_part[lane + s];
    barrier();
  }
  float result = row_part[0];
  barrier();
  return result;
}
