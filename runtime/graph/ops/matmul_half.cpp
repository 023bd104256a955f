// matmul of f16 or bf16 matrices: the cooperative-matrix kernel where the
// device has one for the type (matmul_coopmat.h), else the tiled kernel on
// half operands (shaders/matmul_half_tiled.comp); f32 sums rounded once to the
// operands' type.
#include <fmt/format.h>

#include "../../vulkan/device.h"
#include "../../vulkan/error.h"
#include "../graph.h"
#include "batch_matmul.h"
#include "cast.h"
#include "kernel_util.h"
#include "matmul.h"
#include "matmul_coopmat.h"
#include "matmul_tiles.h"
#include "shape_ops.h"
#include "sum_slices.h"

namespace vkt {
namespace {

struct HalfMatmulPush {
  std::uint32_t m, n, k;
};

/// How a user names the type in code, for messages.
const char* dtype_name(DType dtype) {
  return dtype == DType::F16 ? "vkt::DType::F16" : "vkt::DType::BF16";
}

/// C = op(A) op(B) of half matrices, of their type; with a KSplit (matrices
/// only, no cooperative matrices), its f32 partial sums [slices, m, n], which
/// sum_slices adds up before the one rounding (the split's node carries the
/// gradient, this one none).
class HalfMatmulOp final : public Op {
 public:
  HalfMatmulOp(bool transpose_a, bool transpose_b, KSplit split = {})
      : ta_(transpose_a), tb_(transpose_b), split_(split) {}
  std::string type() const override { return split_.split() ? "matmul_split_k" : "matmul"; }
  bool takes_half() const override { return true; }

  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    // [M, K] x [K, N], or [batch, ...]: one workgroup layer per matrix.
    const Shape& sa = in[0].shape();
    const Shape& sb = in[1].shape();
    const int r = sa.rank();
    const auto batch = static_cast<std::uint32_t>(r == 3 ? sa[0] : 1);
    const auto m = static_cast<std::uint32_t>(sa[ta_ ? r - 1 : r - 2]);
    const auto k = static_cast<std::uint32_t>(sa[ta_ ? r - 2 : r - 1]);
    const auto n = static_cast<std::uint32_t>(sb[tb_ ? r - 2 : r - 1]);
    const DType half = in[0].dtype();
    if (!split_.split()) {
      if (const auto tile = cooperative_tile(ctx.device(), half)) {
        record_cooperative_matmul(ctx.stream(), *tile, ctx.buffer(in[0]), ctx.buffer(in[1]),
                                  ctx.buffer(out), m, n, k, batch, ta_, tb_);
        return;
      }
    }
    // The f32 kernel's tiles and order of sums on widened elements.
    const std::uint32_t layers = split_.split() ? split_.slices : batch;
    const TiledShape t = tiled_shape_for(ctx.device(), m, n, layers);
    std::vector<SpecConstant> constants = t.constants();
    constants.push_back(SpecConstant::u32(7, ta_ ? 1u : 0u));
    constants.push_back(SpecConstant::u32(8, tb_ ? 1u : 0u));
    constants.push_back(SpecConstant::u32(18, ops_detail::float_type_code(half)));
    for (const SpecConstant& c : split_.constants()) constants.push_back(c);
    const Kernel& kernel = ctx.device().kernel(
        {.shader = split_.split() ? "matmul_half_tiled_split" : "matmul_half_tiled",
         .local_size = t.local_size(),
         .constants = constants});
    ctx.stream().dispatch(kernel, {ctx.buffer(in[0]), ctx.buffer(in[1]), ctx.buffer(out)},
                          HalfMatmulPush{m, n, k}, t.groups(m, n, layers));
  }

  std::vector<Gradient> gradient(std::span<const Tensor> in, const Tensor&,
                                 const Tensor& dy) const override {
    if (split_.split()) {
      throw Error("matmul_split_k: its gradient belongs to the sum_slices node after it");
    }
    return matmul_detail::matmul_gradients(in[0], in[1], dy, ta_, tb_);
  }

 private:
  bool ta_, tb_;
  KSplit split_;
};

}  // namespace

Tensor matmul_detail::half_matmul(const Tensor& a, const Tensor& b, bool transpose_a,
                                  bool transpose_b, const std::string& what) {
  if (&a.graph() != &b.graph()) {
    throw Error(
        fmt::format("{}: '{}' and '{}' belong to different graphs (devices); copy one "
                    "across first",
                    what, a.name(), b.name()));
  }
  if (a.dtype() != b.dtype()) {
    throw Error(fmt::format(
        "{}: '{}' holds {} values and '{}' {}; cast both to one type (vkt::cast(x, {}))", what,
        a.name(), to_string(a.dtype()), b.name(), to_string(b.dtype()),
        dtype_name(is_half(a.dtype()) ? a.dtype() : b.dtype())));
  }
  const DeviceInfo& device = a.graph().device().info();
  if (!device.storage_16bit) {
    throw Error(fmt::format(
        "{}: {} matmul needs 16-bit storage buffers (storageBuffer16BitAccess), which device "
        "{} ({}) does not offer; compute in f32 there",
        what, to_string(a.dtype()), device.index, device.name));
  }
  const Shape& sa = a.shape();
  const Shape& sb = b.shape();
  const int r = sa.rank();
  if (r < 2 || r != sb.rank()) {
    throw Error(fmt::format(
        "{}: {} matmul takes operands of one rank, 2 or more (matrices, or batches of them), "
        "got {} x {}; reshape them",
        what, to_string(a.dtype()), sa.str(), sb.str()));
  }
  std::int64_t batch = 1;
  for (int i = 0; i < r - 2; ++i) {
    if (sa[i] != sb[i]) {
      throw Error(fmt::format(
          "{}: the batch dimensions differ: {} x {}; both operands need the same leading {} "
          "dimensions",
          what, sa.str(), sb.str(), r - 2));
    }
    batch *= sa[i];
  }
  if (r >= 4) {
    // The leading batch axes ([B, H, T, D] in attention) fold into one: views.
    const Tensor c =
        half_matmul(reshape(a, Shape{batch, sa[r - 2], sa[r - 1]}),
                    reshape(b, Shape{batch, sb[r - 2], sb[r - 1]}), transpose_a, transpose_b, what);
    std::vector<std::int64_t> dims = sa.dims();
    dims[r - 2] = c.shape()[1];
    dims[r - 1] = c.shape()[2];
    return reshape(c, Shape(dims));
  }
  const std::int64_t m = sa[transpose_a ? r - 1 : r - 2], ka = sa[transpose_a ? r - 2 : r - 1];
  const std::int64_t kb = sb[transpose_b ? r - 1 : r - 2], n = sb[transpose_b ? r - 2 : r - 1];
  if (ka != kb) {
    throw Error(fmt::format(
        "{}: inner dimensions differ: {}{} x {}{} ({} vs {}); the columns of the left operand "
        "must match the rows of the right one",
        what, a.shape().str(), transpose_a ? "^T" : "", b.shape().str(), transpose_b ? "^T" : "",
        ka, kb));
  }
  // Where matmuls take the texel kernel (CPU devices): the operands widened
  // to f32 (exact), that kernel's f32 sums, one rounding to the half type:
  // the half kernel's arithmetic (in the texel kernel's summation order) at
  // the f32 kernel's speed; the tiled kernel's barriers are slow on a CPU.
  if (matmul_variant(a.graph().device()) == MatmulVariant::Texel) {
    return cast(f32_matmul(cast(a, DType::F32), cast(b, DType::F32), transpose_a, transpose_b),
                a.dtype());
  }
  // Vulkan's least maxComputeWorkGroupCount[2]: every device dispatches that many layers.
  constexpr std::int64_t layers = 65535;
  if (batch > layers) {
    throw Error(fmt::format(
        "{}: {} matrices in one batched {} matmul, more than the {} the device dispatches at "
        "once; split the batch",
        what, batch, to_string(a.dtype()), layers));
  }
  Graph& graph = a.graph();
  // Few output tiles over a long k (weight gradients), where no cooperative
  // matrices take the product: split-K as the f32 product splits, the
  // slices' f32 partial sums added in slice order and rounded once.
  if (r == 2 && !cooperative_tile(graph.device(), a.dtype())) {
    if (const KSplit split = split_k(graph.device(), m, n, ka); split.split()) {
      const Tensor partials =
          graph.add_node(std::make_unique<HalfMatmulOp>(transpose_a, transpose_b, split), {a, b},
                         Shape{split.slices, m, n});
      const Tensor sum = ops_detail::sum_slices(
          partials, {a, b}, Shape{m, n},
          [transpose_a, transpose_b](std::span<const Tensor> operands, const Tensor& dy) {
            // dy is the rounded product's gradient widened: cast back, the half tensor.
            return matmul_detail::matmul_gradients(
                operands[0], operands[1], cast(dy, operands[0].dtype()), transpose_a, transpose_b);
          });
      return cast(sum, a.dtype());
    }
  }
  return graph.add_node(std::make_unique<HalfMatmulOp>(transpose_a, transpose_b), {a, b},
                        r == 3 ? Shape{batch, m, n} : Shape{m, n}, a.dtype());
}

}  // namespace vkt
