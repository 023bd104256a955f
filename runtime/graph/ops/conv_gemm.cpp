// The implicit-GEMM kernels of conv2d and its gradients: shaders/conv_texel_*.comp
// (conv_texel.glsl over matmul_texel.glsl) and shaders/conv_tiled.comp (over
// matmul_tiled.glsl).
#include "conv_gemm.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "../graph.h"
#include "kernel_util.h"
#include "matmul.h"
#include "matmul_tiles.h"
#include "texel_view.h"

namespace vkt::conv_detail {
namespace {

// The push constants of conv_params.glsl after the matmul's (M, N, K, a_last,
// b_last); the tiled kernel declares a_last and b_last too, unused, so that
// both read one layout.
struct ConvPush {
  std::uint32_t m, n, k, a_last, b_last;
  std::uint32_t in_h, in_w, in_c, out_h, out_w, out_c, k_h, k_w, group_c, group_o;
  std::int32_t stride_h, stride_w, dil_h, dil_w, pad_top, pad_left;
};

constexpr std::uint32_t kTexelRows = 16;  // RM of conv_texel.glsl

struct GemmShape {
  std::int64_t m, n, k;
};

GemmShape gemm_shape(ConvGemm gemm, const ConvGeometry& g) {
  const std::int64_t taps = g.k_h * g.k_w;
  switch (gemm) {
    case ConvGemm::Forward:
      return {g.batch * g.out_h * g.out_w, g.group_o(), taps * g.group_c()};
    case ConvGemm::BackpropInput:
      return {g.batch * g.in_h * g.in_w, g.group_c(), taps * g.group_o()};
    case ConvGemm::BackpropFilter:
      break;
  }
  return {taps * g.group_c(), g.group_o(), g.batch * g.out_h * g.out_w};
}

std::uint32_t u32(std::int64_t v) {
  return static_cast<std::uint32_t>(v);
}
std::int32_t i32(std::int64_t v) {
  return static_cast<std::int32_t>(v);
}

const char* gemm_tag(ConvGemm gemm) {
  switch (gemm) {
    case ConvGemm::Forward:
      return "fwd";
    case ConvGemm::BackpropInput:
      return "bwi";
    case ConvGemm::BackpropFilter:
      break;
  }
  return "bwf";
}

// Whether the operands' 4 consecutive k (filter rows for BackpropFilter) are
// one aligned texel: the group's channels and all channels come in fours.
bool a_whole_texels(ConvGemm gemm, const ConvGeometry& g) {
  if (gemm == ConvGemm::BackpropInput) return g.group_o() % 4 == 0 && g.out_c % 4 == 0;
  return g.group_c() % 4 == 0 && g.in_c % 4 == 0;
}

void record_texel(RecordContext& ctx, ConvGemm gemm, const ConvGeometry& g, GemmShape s,
                  ConvPush push, const BufferRange& a, const BufferRange& b, const BufferRange& c) {
  // Narrow outputs get narrower blocks, as in matmul (texel_view.h).
  const matmul_detail::TexelBlock block =
      matmul_detail::texel_block(u32(s.m), u32(s.n), kTexelRows);
  const bool a_vec = a_whole_texels(gemm, g);
  // B's rows (filter or dy) start at a group's first output channel.
  const bool b_rows_aligned = g.out_c % 4 == 0 && g.group_o() % 4 == 0;
  const Kernel& kernel = ctx.device().kernel(
      {.shader = fmt::format("conv_texel_{}_c{}", gemm_tag(gemm), block.rn4),
       .local_size = {matmul_detail::kTexelLanes, 1, 1},
       .constants = {block.lanes_constant(), SpecConstant::u32(2, gemm == ConvGemm::BackpropFilter),
                     SpecConstant::u32(3, gemm == ConvGemm::BackpropInput),
                     SpecConstant::u32(5, b_rows_aligned), SpecConstant::u32(6, a_vec),
                     SpecConstant::u32(7, gemm == ConvGemm::BackpropInput && a_vec),
                     // The divisors of the index arithmetic (conv_geometry.glsl).
                     SpecConstant::u32(8, push.in_h), SpecConstant::u32(9, push.in_w),
                     SpecConstant::u32(10, push.out_h), SpecConstant::u32(11, push.out_w),
                     SpecConstant::u32(12, push.k_w), SpecConstant::u32(13, push.group_c),
                     SpecConstant::u32(14, push.group_o), SpecConstant::i32(15, push.stride_h),
                     SpecConstant::i32(16, push.stride_w)}});
  push.a_last = u32(a.size() / 16 - 1);
  push.b_last = u32(b.size() / 16 - 1);
  ctx.stream().dispatch(kernel, {a, b, c}, push, block.groups(u32(g.groups)));
}

void record_tiled(RecordContext& ctx, ConvGemm gemm, const ConvGeometry& g, GemmShape s,
                  const ConvPush& push, const BufferRange& a, const BufferRange& b,
                  const BufferRange& c, const KSplit& split, OperandTypes types) {
  // matmul's tiles; the filter gradient stages A along m, which are
  // consecutive channels of x.
  const TiledShape t =
      tiled_shape_for(ctx.device(), u32(s.m), u32(s.n), u32(g.groups) * split.slices);
  std::vector<SpecConstant> constants = t.constants();
  constants.push_back(SpecConstant::u32(7, gemm == ConvGemm::BackpropFilter));
  constants.push_back(SpecConstant::u32(9, static_cast<std::uint32_t>(gemm)));
  constants.push_back(SpecConstant::u32(18, ops_detail::float_type_code(types.a)));
  constants.push_back(SpecConstant::u32(19, ops_detail::float_type_code(types.b)));
  for (const SpecConstant& sc : split.constants()) constants.push_back(sc);
  const Kernel& kernel = ctx.device().kernel(
      {.shader = "conv_tiled", .local_size = t.local_size(), .constants = constants});
  ctx.stream().dispatch(kernel, {a, b, c}, push,
                        t.groups(u32(s.m), u32(s.n), u32(g.groups) * split.slices));
}

}  // namespace

std::string ConvGeometry::str() const {
  return fmt::format("{}x{} stride {}x{} dilation {}x{} groups {}", k_h, k_w, stride_h, stride_w,
                     dil_h, dil_w, groups);
}

KSplit split_conv_gemm(const Device& device, ConvGemm gemm, const ConvGeometry& g) {
  const GemmShape s = gemm_shape(gemm, g);
  return split_k(device, s.m, s.n * g.groups, s.k);
}

void record_conv_gemm(RecordContext& ctx, ConvGemm gemm, const ConvGeometry& g,
                      const BufferRange& a, const BufferRange& b, const BufferRange& c,
                      const KSplit& split, OperandTypes types) {
  const GemmShape s = gemm_shape(gemm, g);
  const ConvPush push{.m = u32(s.m),
                      .n = u32(s.n),
                      .k = u32(s.k),
                      .a_last = 0,
                      .b_last = 0,
                      .in_h = u32(g.in_h),
                      .in_w = u32(g.in_w),
                      .in_c = u32(g.in_c),
                      .out_h = u32(g.out_h),
                      .out_w = u32(g.out_w),
                      .out_c = u32(g.out_c),
                      .k_h = u32(g.k_h),
                      .k_w = u32(g.k_w),
                      .group_c = u32(g.group_c()),
                      .group_o = u32(g.group_o()),
                      .stride_h = i32(g.stride_h),
                      .stride_w = i32(g.stride_w),
                      .dil_h = i32(g.dil_h),
                      .dil_w = i32(g.dil_w),
                      .pad_top = i32(g.pad_top),
                      .pad_left = i32(g.pad_left)};
  const bool f32 = types.a == DType::F32 && types.b == DType::F32;
  if (f32 && !split.split() && matmul_variant(ctx.device()) == MatmulVariant::Texel) {
    const auto ta = matmul_detail::texel_view(ctx.device(), a);
    const auto tb = matmul_detail::texel_view(ctx.device(), b);
    if (ta && tb) return record_texel(ctx, gemm, g, s, push, *ta, *tb, c);
  }
  record_tiled(ctx, gemm, g, s, push, a, b, c, split, types);
}

}  // namespace vkt::conv_detail
