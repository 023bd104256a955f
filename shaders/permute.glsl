// permute.comp's and permute_vec4.comp's constants and index arithmetic.
// Dims and strides are specialization constants: the coordinates come from
// divisions by constants.
layout(constant_id = 1) const uint O0 = 1;  // output dims
layout(constant_id = 2) const uint O1 = 1;
layout(constant_id = 3) const uint O2 = 1;
layout(constant_id = 4) const uint O3 = 1;
layout(constant_id = 5) const uint O4 = 1;
layout(constant_id = 6) const uint O5 = 1;
layout(constant_id = 7) const uint S0 = 0;  // x's strides, in output axis order
layout(constant_id = 8) const uint S1 = 0;
layout(constant_id = 9) const uint S2 = 0;
layout(constant_id = 10) const uint S3 = 0;
layout(constant_id = 11) const uint S4 = 0;
layout(constant_id = 12) const uint S5 = 0;

// Where output element i is read from in x.
uint permuted_source(uint i) {
  uint rest = i;
  uint from = (rest % O5) * S5;
  rest /= O5;
  from += (rest % O4) * S4;
  rest /= O4;
  from += (rest % O3) * S3;
  rest /= O3;
  from += (rest % O2) * S2;
  rest /= O2;
  from += (rest % O1) * S1;
  rest /= O1;
  return from + rest * S0;
}
