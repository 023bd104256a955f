// matmul (shaders/matmul_tiled.comp; shaders/matmul_texel_r*c*.comp, which
// share shaders/matmul_texel.glsl) and bias_add (shaders/matmul_bias.comp);
// rank-3 operands go to batch_matmul.cpp.
#include "matmul.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string_view>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "batch_matmul.h"
#include "cast.h"
#include "elementwise.h"
#include "elementwise_chain.h"
#include "kernel_util.h"
#include "matmul_tiles.h"
#include "shape_ops.h"
#include "sum_slices.h"

namespace vkt {
namespace {

struct TiledPush {
  std::uint32_t m, n, k;
};
struct TexelPush {
  std::uint32_t m, n, k, a_last, b_last;
};

}  // namespace

// Shared with batch_matmul.cpp.
std::optional<BufferRange> matmul_detail::texel_view(const Device& device, const BufferRange& r) {
  const std::size_t bytes = align_up(r.size(), 16);
  const VkPhysicalDeviceLimits& limits = device.limits();
  if (r.offset % std::max<VkDeviceSize>(limits.minTexelBufferOffsetAlignment, 16) != 0 ||
      r.offset + bytes > r.buffer->size() || bytes / 16 > limits.maxTexelBufferElements) {
    return std::nullopt;
  }
  return BufferRange(*r.buffer, r.offset, bytes);
}

matmul_detail::TexelBlock matmul_detail::texel_block(std::uint32_t m, std::uint32_t n,
                                                     std::optional<std::uint32_t> rm) {
  // Workgroups below which the 4-lane split is not worth fewer of them.
  constexpr std::uint32_t kMinSplitGroups = 16;
  TexelBlock b;
  b.rm = rm.value_or(m <= 8 ? 8 : 16);
  b.rn4 = n <= 4 * kTexelLanes ? 1 : n <= 8 * kTexelLanes ? 2 : 4;
  const std::uint32_t row_blocks = (m + b.rm - 1) / b.rm;
  if (n <= 16 && row_blocks >= 2 * kMinSplitGroups) b.lanes_n = kTexelLanes / 2;
  const std::uint32_t columns = 4 * b.rn4 * b.lanes_n;
  const std::uint32_t rows = b.rm * (kTexelLanes / b.lanes_n);
  b.groups_x = (n + columns - 1) / columns;
  b.groups_y = (m + rows - 1) / rows;
  return b;
}

std::string matmul_detail::TexelBlock::suffix() const {
  return fmt::format("r{}c{}", rm, rn4);
}

namespace {

using matmul_detail::kTexelLanes;
using matmul_detail::texel_block;
using matmul_detail::texel_view;

/// C = op(A) op(B); with a KSplit, its partial sums [slices, m, n], which
/// sum_slices adds up (the split's node carries the gradient, this one none).
class MatmulOp final : public Op {
 public:
  MatmulOp(bool transpose_a, bool transpose_b, KSplit split = {})
      : ta_(transpose_a), tb_(transpose_b), split_(split) {}
  std::string type() const override { return split_.split() ? "matmul_split_k" : "matmul"; }

  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const int rank = out.shape().rank();
    const auto m = static_cast<std::uint32_t>(out.shape()[rank - 2]);
    const auto n = static_cast<std::uint32_t>(out.shape()[rank - 1]);
    const auto k = static_cast<std::uint32_t>(in[0].shape()[ta_ ? 0 : 1]);
    const BufferRange a = ctx.buffer(in[0]), b = ctx.buffer(in[1]), c = ctx.buffer(out);
    if (!split_.split() && matmul_variant(ctx.device()) == MatmulVariant::Texel) {
      const auto ta = texel_view(ctx.device(), a), tb = texel_view(ctx.device(), b);
      if (ta && tb) return record_texel(ctx, *ta, *tb, c, m, n, k);
    }
    record_tiled(ctx, a, b, c, m, n, k);
  }

  std::vector<Gradient> gradient(std::span<const Tensor> in, const Tensor&,
                                 const Tensor& dy) const override {
    if (split_.split()) {
      throw Error("matmul_split_k: its gradient belongs to the sum_slices node after it");
    }
    return matmul_detail::matmul_gradients(in[0], in[1], dy, ta_, tb_);
  }

 private:
  void record_texel(RecordContext& ctx, BufferRange a, BufferRange b, BufferRange c,
                    std::uint32_t m, std::uint32_t n, std::uint32_t k) const {
    Device& device = ctx.device();
    const matmul_detail::TexelBlock block = texel_block(m, n);
    const std::uint32_t a_row = ta_ ? m : k, b_row = tb_ ? k : n;  // stored row lengths
    const Kernel& kernel = device.kernel(
        {.shader = "matmul_texel_" + block.suffix(),
         .local_size = {kTexelLanes, 1, 1},
         .constants = {block.lanes_constant(), SpecConstant::u32(2, ta_), SpecConstant::u32(3, tb_),
                       SpecConstant::u32(4, a_row % 4 == 0),
                       SpecConstant::u32(5, b_row % 4 == 0)}});
    const TexelPush push{m, n, k, static_cast<std::uint32_t>(a.size() / 16 - 1),
                         static_cast<std::uint32_t>(b.size() / 16 - 1)};
    ctx.stream().dispatch(kernel, {a, b, c}, push, block.groups());
  }

  void record_tiled(RecordContext& ctx, BufferRange a, BufferRange b, BufferRange c,
                    std::uint32_t m, std::uint32_t n, std::uint32_t k) const {
    const TiledShape t = tiled_shape_for(ctx.device(), m, n, split_.slices);
    std::vector<SpecConstant> constants = t.constants();
    constants.push_back(SpecConstant::u32(7, ta_));
    constants.push_back(SpecConstant::u32(8, tb_));
    for (const SpecConstant& c : split_.constants()) constants.push_back(c);
    const Kernel& kernel = ctx.device().kernel({.shader = tiled_matmul_shader(m, n, k),
                                                .local_size = t.local_size(),
                                                .constants = constants});
    ctx.stream().dispatch(kernel, {a, b, c}, TiledPush{m, n, k}, t.groups(m, n, split_.slices));
  }

  bool ta_, tb_;
  KSplit split_;
};

struct BiasPush {
  std::uint32_t n, d;
};

class BiasAddOp final : public Op {
 public:
  std::string type() const override { return "bias_add"; }
  std::optional<ElementwiseStep> elementwise_step() const override {
    return ElementwiseStep{ops_detail::kBinaryStepCode};  // add
  }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const std::int64_t n = out.shape().elements();
    const auto d = static_cast<std::uint32_t>(in[1].shape()[0]);
    const Kernel& kernel = ctx.device().kernel(
        {.shader = "matmul_bias", .local_size = {ops_detail::kLocalSize, 1, 1}});
    ops_detail::dispatch_1d(ctx, kernel, {ctx.buffer(in[0]), ctx.buffer(in[1]), ctx.buffer(out)},
                            BiasPush{static_cast<std::uint32_t>(n), d}, n);
  }
  std::vector<Gradient> gradient(std::span<const Tensor> in, const Tensor&,
                                 const Tensor& dy) const override {
    return {Gradient{dy}, Gradient{sum_to(dy, in[1].shape())}};
  }
};

void check_operands(const char* op, const Tensor& a, const Tensor& b, const std::string& what) {
  if (!a.valid() || !b.valid()) throw Error(fmt::format("{}: an input tensor is empty", op));
  if (&a.graph() != &b.graph()) {
    throw Error(
        fmt::format("{}: '{}' and '{}' belong to different graphs (devices); copy one "
                    "across first",
                    what, a.name(), b.name()));
  }
  for (const Tensor* t : {&a, &b}) {
    if (t->dtype() != DType::F32) {
      throw Error(fmt::format("{}: input '{}' {}; {} takes f32", what, t->name(),
                              ops_detail::not_f32(*t), op));
    }
  }
}

}  // namespace

std::vector<Gradient> matmul_detail::matmul_gradients(const Tensor& a, const Tensor& b,
                                                      const Tensor& dy, bool ta, bool tb) {
  // Transposed back where the operand was transposed; with rank-3 operands
  // these matmuls are batched too, so the formulas hold matrix by matrix.
  if (!ta && !tb) return {Gradient{matmul(dy, b, false, true)}, {matmul(a, dy, true, false)}};
  if (ta && !tb) return {Gradient{matmul(b, dy, false, true)}, {matmul(a, dy, false, false)}};
  if (!ta && tb) return {Gradient{matmul(dy, b, false, false)}, {matmul(dy, a, true, false)}};
  return {Gradient{matmul(b, dy, true, true)}, {matmul(dy, a, true, true)}};
}

MatmulVariant matmul_variant(const Device& device) {
  switch (device.options().matmul) {
    case MatmulKernels::Tiled:
      return MatmulVariant::Tiled;
    case MatmulKernels::Texel:
      return MatmulVariant::Texel;
    case MatmulKernels::Auto:
      break;
  }
  return device.info().is_lavapipe ? MatmulVariant::Texel : MatmulVariant::Tiled;
}

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b) {
  if (a.valid() && b.valid() && a.dtype() == DType::F32 && b.dtype() == DType::F32 &&
      &a.graph() == &b.graph()) {
    // The graph's precision policy: f32 matrices (and batches of them, one
    // rank) multiply in the half type.
    if (const DType half = compute_dtype(a.graph().options().precision);
        is_half(half) && a.shape().rank() >= 2 && a.shape().rank() == b.shape().rank()) {
      if (matmul_variant(a.graph().device()) == MatmulVariant::Texel) {
        // The half product where matmuls take the f32 texel kernel (CPU
        // devices) is that kernel on operands widened from half and one
        // rounding (matmul_half.cpp): the same bits with the operands and
        // the product rounded in place, three elementwise ops instead of
        // six casts, and no half tensor.
        return round_to_half(
            matmul_detail::f32_matmul(round_to_half(a, half), round_to_half(b, half), transpose_a,
                                      transpose_b),
            half);
      }
      return cast(matmul(cast(a, half), cast(b, half), transpose_a, transpose_b), DType::F32);
    }
  }
  return matmul_detail::f32_matmul(a, b, transpose_a, transpose_b);
}

Tensor matmul_detail::f32_matmul(const Tensor& a, const Tensor& b, bool transpose_a,
                                 bool transpose_b) {
  const std::string what =
      a.valid() && b.valid()
          ? fmt::format("matmul('{}', '{}'{}{})", a.name(), b.name(),
                        transpose_a ? ", transpose_a" : "", transpose_b ? ", transpose_b" : "")
          : "matmul";
  if (a.valid() && b.valid() && (is_half(a.dtype()) || is_half(b.dtype()))) {
    return matmul_detail::half_matmul(a, b, transpose_a, transpose_b, what);
  }
  check_operands("matmul", a, b, what);
  const Shape& sa = a.shape();
  const Shape& sb = b.shape();
  if (sa.rank() >= 4 && sa.rank() == sb.rank()) {
    // The leading batch axes ([B, H, T, D] in attention) fold into one: views.
    const int r = sa.rank();
    std::int64_t batch = 1;
    for (int i = 0; i < r - 2; ++i) {
      if (sa[i] != sb[i]) {
        throw Error(
            fmt::format("{}: the batch dimensions differ: {} x {}; both operands need the "
                        "same leading {} dimensions",
                        what, sa.str(), sb.str(), r - 2));
      }
      batch *= sa[i];
    }
    const Tensor c =
        matmul(reshape(a, Shape{batch, sa[r - 2], sa[r - 1]}),
               reshape(b, Shape{batch, sb[r - 2], sb[r - 1]}), transpose_a, transpose_b);
    std::vector<std::int64_t> dims(sa.dims().begin(), sa.dims().end() - 2);
    dims.push_back(c.shape()[1]);
    dims.push_back(c.shape()[2]);
    return reshape(c, Shape(dims));
  }
  if (a.shape().rank() == 3 || b.shape().rank() == 3) {
    return matmul_detail::batch_matmul(a, b, transpose_a, transpose_b, what);
  }
  if (a.shape().rank() != 2 || b.shape().rank() != 2) {
    throw Error(
        fmt::format("{}: both operands must be matrices (rank 2) or batches of matrices "
                    "(rank 3 to 6, both of one rank), got {} x {}; reshape them first",
                    what, a.shape().str(), b.shape().str()));
  }
  const std::int64_t m = a.shape()[transpose_a ? 1 : 0], ka = a.shape()[transpose_a ? 0 : 1];
  const std::int64_t kb = b.shape()[transpose_b ? 1 : 0], n = b.shape()[transpose_b ? 0 : 1];
  if (ka != kb) {
    throw Error(
        fmt::format("{}: inner dimensions differ: {}{} x {}{} ({} vs {}); the columns of "
                    "the left operand must match the rows of the right one",
                    what, a.shape().str(), transpose_a ? "^T" : "", b.shape().str(),
                    transpose_b ? "^T" : "", ka, kb));
  }
  Graph& graph = a.graph();
  // Few output tiles over a long k (weight gradients, tall-skinny products):
  // split-K, so that the product runs on the whole device.
  if (const KSplit split = split_k(graph.device(), m, n, ka); split.split()) {
    const Tensor partials =
        graph.add_node(std::make_unique<MatmulOp>(transpose_a, transpose_b, split), {a, b},
                       Shape{split.slices, m, n});
    return ops_detail::sum_slices(
        partials, {a, b}, Shape{m, n},
        [transpose_a, transpose_b](std::span<const Tensor> operands, const Tensor& dy) {
          return matmul_detail::matmul_gradients(operands[0], operands[1], dy, transpose_a,
                                                 transpose_b);
        });
  }
  return graph.add_node(std::make_unique<MatmulOp>(transpose_a, transpose_b), {a, b}, Shape{m, n});
}

Tensor bias_add(const Tensor& x, const Tensor& bias) {
  const std::string what = x.valid() && bias.valid()
                               ? fmt::format("bias_add('{}', '{}')", x.name(), bias.name())
                               : "bias_add";
  check_operands("bias_add", x, bias, what);
  if (x.shape().rank() < 1 || bias.shape().rank() != 1 ||
      bias.shape()[0] != x.shape()[x.shape().rank() - 1]) {
    throw Error(
        fmt::format("{}: the bias must be a vector as long as the last dimension of x, "
                    "got x {} and bias {}",
                    what, x.shape().str(), bias.shape().str()));
  }
  return x.graph().add_node(std::make_unique<BiasAddOp>(), {x, bias}, x.shape());
}

}  // namespace vkt
