// The convolution's geometry, the push-constant members that the implicit-GEMM
// kernels (conv_texel.glsl, conv_tiled.comp) add after their matmul ones. Always
// in forward terms: x [batch, in_h, in_w, in_c], filter [k_h, k_w, group_c,
// out_c], y [batch, out_h, out_w, out_c], group_c = in_c / groups and group_o =
// out_c / groups; workgroup z is the group.
#define CONV_PARAMS                                                                     \
  uint in_h, in_w, in_c, out_h, out_w, out_c, k_h, k_w, group_c, group_o;               \
  int stride_h, stride_w, dil_h, dil_w, pad_top, pad_left;
