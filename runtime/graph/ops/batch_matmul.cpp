// The batched matmul (rank 3): shaders/matmul_batched_texel_r*c*.comp (over
// matmul_batched_texel.glsl and matmul_texel.glsl) and
// shaders/matmul_batched_tiled.comp (over matmul_tiled.glsl). The kernels are
// matmul's own with each operand's batch offset added, one batch per workgroup
// z, so that a batch of small matrices is one dispatch.
#include "batch_matmul.h"

#include <fmt/format.h>

#include <algorithm>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "kernel_util.h"
#include "matmul.h"
#include "matmul_tiles.h"

namespace vkt::matmul_detail {
namespace {

// The shaders' push constants: matmul's, then the first batch of the dispatch.
struct TiledPush {
  std::uint32_t m, n, k, batch0;
};
struct TexelPush {
  std::uint32_t m, n, k, a_last, b_last, batch0;
};

// Invocations of a texel-kernel workgroup: lavapipe's SIMD width, as in matmul.cpp.

class BatchMatmulOp final : public Op {
 public:
  BatchMatmulOp(bool transpose_a, bool transpose_b) : ta_(transpose_a), tb_(transpose_b) {}
  std::string type() const override { return "batch_matmul"; }

  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const Dims d{.batch = static_cast<std::uint32_t>(out.shape()[0]),
                 .m = static_cast<std::uint32_t>(out.shape()[1]),
                 .n = static_cast<std::uint32_t>(out.shape()[2]),
                 .k = static_cast<std::uint32_t>(in[0].shape()[ta_ ? 1 : 2])};
    const BufferRange a = ctx.buffer(in[0]), b = ctx.buffer(in[1]), c = ctx.buffer(out);
    if (matmul_variant(ctx.device()) == MatmulVariant::Texel) {
      const auto ta = texel_view(ctx.device(), a), tb = texel_view(ctx.device(), b);
      if (ta && tb) return record_texel(ctx, *ta, *tb, c, d);
    }
    record_tiled(ctx, a, b, c, d);
  }

  std::vector<Gradient> gradient(std::span<const Tensor> in, const Tensor&,
                                 const Tensor& dy) const override {
    return matmul_gradients(in[0], in[1], dy, ta_, tb_);
  }

 private:
  struct Dims {
    std::uint32_t batch, m, n, k;
  };

  // One dispatch per run of batches that fits the device's workgroup count in
  // z (65535 at least, so nearly always a single dispatch).
  template <typename Push>
  void dispatch_batches(RecordContext& ctx, const Kernel& kernel, std::uint32_t x, std::uint32_t y,
                        BufferRange a, BufferRange b, BufferRange c, Push push,
                        std::uint32_t batch) const {
    const std::uint32_t most = ctx.device().limits().maxComputeWorkGroupCount[2];
    for (std::uint32_t first = 0; first < batch; first += most) {
      push.batch0 = first;
      ctx.stream().dispatch(kernel, {a, b, c}, push, Groups{x, y, std::min(most, batch - first)});
    }
  }

  void record_texel(RecordContext& ctx, BufferRange a, BufferRange b, BufferRange c, Dims d) const {
    // matmul's block shapes (texel_view.h).
    const matmul_detail::TexelBlock block = matmul_detail::texel_block(d.m, d.n);
    const std::uint32_t a_row = ta_ ? d.m : d.k, b_row = tb_ ? d.k : d.n;  // stored row lengths
    const Kernel& kernel = ctx.device().kernel(
        {.shader = "matmul_batched_texel_" + block.suffix(),
         .local_size = {matmul_detail::kTexelLanes, 1, 1},
         .constants = {block.lanes_constant(), SpecConstant::u32(2, ta_), SpecConstant::u32(3, tb_),
                       SpecConstant::u32(4, a_row % 4 == 0),
                       SpecConstant::u32(5, b_row % 4 == 0)}});
    const TexelPush push{d.m,
                         d.n,
                         d.k,
                         static_cast<std::uint32_t>(a.size() / 16 - 1),
                         static_cast<std::uint32_t>(b.size() / 16 - 1),
                         0};
    dispatch_batches(ctx, kernel, block.groups_x, block.groups_y, a, b, c, push, d.batch);
  }

  void record_tiled(RecordContext& ctx, BufferRange a, BufferRange b, BufferRange c, Dims d) const {
    const TiledShape t = tiled_shape_for(ctx.device(), d.m, d.n, d.batch);
    std::vector<SpecConstant> constants = t.constants();
    constants.push_back(SpecConstant::u32(7, ta_));
    constants.push_back(SpecConstant::u32(8, tb_));
    const Kernel& kernel = ctx.device().kernel(
        {.shader = "matmul_batched_tiled", .local_size = t.local_size(), .constants = constants});
    const Groups grid = t.groups(d.m, d.n);
    dispatch_batches(ctx, kernel, grid[0], grid[1], a, b, c, TiledPush{d.m, d.n, d.k, 0}, d.batch);
  }

  bool ta_, tb_;
};

}  // namespace

Tensor batch_matmul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b,
                    const std::string& what) {
  const Shape& as = a.shape();
  const Shape& bs = b.shape();
  if (as.rank() != bs.rank() && (as.rank() == 2 || bs.rank() == 2)) {
    // Not broadcast implicitly: a matrix shared by the whole batch is usually
    // a weight whose gradient must be summed over the batch, which a
    // broadcast_to in the graph makes explicit.
    throw Error(fmt::format(
        "{}: a batch of matrices (rank 3) and a matrix (rank 2), {} x {}; both operands "
        "must have the same rank: reshape the batch into one matrix ([B, M, K] to [B*M, K]) "
        "or broadcast the matrix to the batch (broadcast_to)",
        what, as.str(), bs.str()));
  }
  if (as.rank() != 3 || bs.rank() != 3) {
    throw Error(
        fmt::format("{}: both operands must be matrices (rank 2) or batches of matrices "
                    "(rank 3), got {} x {}; reshape them first",
                    what, as.str(), bs.str()));
  }
  if (as[0] != bs[0]) {
    throw Error(
        fmt::format("{}: batch dimensions differ: {} x {} ({} vs {}); a batched matmul "
                    "multiplies matrix i of one operand by matrix i of the other",
                    what, as.str(), bs.str(), as[0], bs[0]));
  }
  const std::int64_t m = as[transpose_a ? 2 : 1], ka = as[transpose_a ? 1 : 2];
  const std::int64_t kb = bs[transpose_b ? 2 : 1], n = bs[transpose_b ? 1 : 2];
  if (ka != kb) {
    throw Error(fmt::format(
        "{}: inner dimensions differ: {}{} x {}{} ({} vs {}); the columns of "
        "the left operand must match the rows of the right one",
        what, as.str(), transpose_a ? "^T" : "", bs.str(), transpose_b ? "^T" : "", ka, kb));
  }
  return a.graph().add_node(std::make_unique<BatchMatmulOp>(transpose_a, transpose_b), {a, b},
                            Shape{as[0], m, n});
}

}  // namespace vkt::matmul_detail
