// Fused attention (shaders/attention_fwd.comp, attention_bwd_q.comp,
// attention_bwd_kv.comp). An op has one output, so the forward writes one flat
// tensor holding the result and each query's log-sum-exp after it; the result
// is a view on its front (AttentionResultOp), whose gradient runs the backward
// kernels on both parts. Likewise dk and dv are the two halves of one output.
#include "fused_attention.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "cast.h"
#include "kernel_util.h"
#include "shape_ops.h"

namespace vkt::ops_detail {
namespace {

// attention.glsl's ROWS and LANES.
constexpr std::uint32_t kRows = 16;
constexpr std::uint32_t kLanes = 16;
// attention.glsl's ACC array (output elements per invocation) stays small.
constexpr std::int64_t kMaxHeadDim = 256;

struct AttentionPush {
  std::uint32_t tq, tk, heads, causal;
  float scale;
  std::uint32_t threshold;
  float drop_scale;
  std::uint32_t key;
};

/// q, k or v seen as [matrices, rows, D].
struct Geometry {
  std::uint32_t matrices, heads, tq, tk, d;
};

Geometry geometry(const Shape& q, const Shape& k) {
  const int r = q.rank();
  return {static_cast<std::uint32_t>(q.elements() / (q[r - 2] * q[r - 1])),
          static_cast<std::uint32_t>(r == 4 ? q[1] : 1), static_cast<std::uint32_t>(q[r - 2]),
          static_cast<std::uint32_t>(k[r - 2]), static_cast<std::uint32_t>(q[r - 1])};
}

std::size_t shared_bytes(std::uint32_t d, std::uint32_t tile) {
  const std::size_t dp = d + 1, rows = kRows;
  const std::size_t fwd = (rows + tile) * dp + std::size_t{tile} * d + 2 * rows * tile;
  const std::size_t bwd_q =
      2 * rows * dp + 2 * std::size_t{tile} * dp + rows * tile + rows * kLanes;
  const std::size_t bwd_kv =
      2 * rows * dp + 2 * std::size_t{tile} * dp + 2 * tile + 2 * rows * tile;
  return 4 * std::max({fwd, bwd_q, bwd_kv});
}

class AttentionKernelOp : public Op {
 public:
  AttentionKernelOp(FusedAttentionParams params, std::uint32_t tile)
      : params_(params), tile_(tile) {}
  /// q, k and v may be half tensors (one type), widened as the kernels read them.
  bool takes_half() const override { return true; }

 protected:
  /// `qkv` and `o`: the types of q, k and v and of the result (and its gradient).
  void dispatch(RecordContext& ctx, const char* shader, std::span<const BufferRange> buffers,
                const Geometry& g, std::uint32_t rows, DType qkv, DType o) const {
    const bool drop = ctx.training() && params_.dropout > 0.0f;
    const double threshold = std::ldexp(static_cast<double>(params_.dropout), 32);
    const AttentionPush push{
        g.tq,
        g.tk,
        g.heads,
        params_.causal ? 1u : 0u,
        params_.scale,
        drop ? static_cast<std::uint32_t>(std::min(threshold, 4294967295.0)) : 0u,
        drop ? static_cast<float>(1.0 / (1.0 - params_.dropout)) : 1.0f,
        params_.key};
    const Kernel& kernel =
        ctx.device().kernel({.shader = shader,
                             .constants = {SpecConstant::u32(0, g.d), SpecConstant::u32(1, tile_),
                                           SpecConstant::u32(2, float_type_code(qkv)),
                                           SpecConstant::u32(3, float_type_code(o))}});
    ctx.stream().dispatch(kernel, buffers, std::as_bytes(std::span(&push, 1)),
                          Groups{(rows + kRows - 1) / kRows, g.matrices, 1});
  }

  FusedAttentionParams params_;
  std::uint32_t tile_;
};

/// The three kernels' buffers: q, k, v, the step parameters, then `rest`.
std::vector<BufferRange> buffers(RecordContext& ctx, std::span<const Tensor> in,
                                 std::initializer_list<Tensor> rest) {
  std::vector<BufferRange> b{ctx.buffer(in[0]), ctx.buffer(in[1]), ctx.buffer(in[2]),
                             ctx.step_params()};
  for (const Tensor& t : rest) b.push_back(ctx.buffer(t));
  return b;
}

/// A gradient kernel: q's (attention_bwd_q.comp, over blocks of queries), or
/// k's and v's one after the other in one flat output (attention_bwd_kv.comp,
/// over blocks of keys). Inputs q, k, v, the forward's flat output and the
/// result's gradient (of the result's type).
class AttentionGradOp final : public AttentionKernelOp {
 public:
  AttentionGradOp(FusedAttentionParams params, std::uint32_t tile, bool kv)
      : AttentionKernelOp(params, tile), kv_(kv) {}
  std::string type() const override { return kv_ ? "attention_grad_kv" : "attention_grad_q"; }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const Geometry g = geometry(in[0].shape(), in[1].shape());
    dispatch(ctx, kv_ ? "attention_bwd_kv" : "attention_bwd_q",
             buffers(ctx, in, {in[3], in[4], out}), g, kv_ ? g.tk : g.tq, in[0].dtype(),
             in[3].dtype());
  }
  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor&,
                                 const Tensor&) const override {
    throw Error(fmt::format("{}: second derivatives are not supported", type()));
  }

 private:
  bool kv_;
};

/// The forward (attention_fwd.comp): inputs q, k, v; output the result
/// followed by each query's log-sum-exp, flat (attention.glsl's lse_word), of
/// the result's type. Its gradient is AttentionResultOp's.
class FusedAttentionOp final : public AttentionKernelOp {
 public:
  using AttentionKernelOp::AttentionKernelOp;
  std::string type() const override { return "fused_attention"; }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const Geometry g = geometry(in[0].shape(), in[1].shape());
    dispatch(ctx, "attention_fwd", buffers(ctx, in, {out}), g, g.tq, in[0].dtype(), out.dtype());
  }
  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor&,
                                 const Tensor&) const override {
    throw Error("internal: fused_attention's flat output is read only through its result");
  }
};

/// The result: a view on the front of the flat output (input 0), which also
/// takes q, k and v so that its gradient can run the backward kernels, on dy
/// itself (no copy of it padded to the flat output's size).
class AttentionResultOp final : public Op {
 public:
  AttentionResultOp(FusedAttentionParams params, std::uint32_t tile)
      : params_(params), tile_(tile) {}
  std::string type() const override { return "fused_attention_result"; }
  void record(RecordContext&, std::span<const Tensor>, const Tensor&) const override {}
  std::optional<std::size_t> view_offset() const override { return 0; }
  bool takes_half() const override { return true; }
  std::vector<Gradient> gradient(std::span<const Tensor> in, const Tensor& out,
                                 const Tensor& dy) const override {
    Graph& graph = out.graph();
    const Tensor &flat = in[0], &q = in[1], &k = in[2], &v = in[3];
    const Tensor d_out = dy.dtype() == out.dtype() ? dy : cast(dy, out.dtype());
    const std::int64_t n = k.shape().elements();
    const Tensor dq = graph.add_node(std::make_unique<AttentionGradOp>(params_, tile_, false),
                                     {q, k, v, flat, d_out}, q.shape());
    const Tensor dkv = graph.add_node(std::make_unique<AttentionGradOp>(params_, tile_, true),
                                      {q, k, v, flat, d_out}, Shape{2 * n});
    // The kernels sum in f32; a half input's gradient is of its type, so
    // that the cast before it gives the rounded gradient round_to_half would.
    const auto of_input_type = [&](const Tensor& d) { return cast(d, q.dtype()); };
    return {Gradient{}, Gradient{of_input_type(dq)},
            Gradient{of_input_type(reshape(slice_rows(dkv, 0, n), k.shape()))},
            Gradient{of_input_type(reshape(slice_rows(dkv, n, n), k.shape()))}};
  }

 private:
  FusedAttentionParams params_;
  std::uint32_t tile_;
};

}  // namespace

std::optional<std::uint32_t> fused_attention_tile(const Device& device, std::int64_t d) {
  if (d < 1 || d > kMaxHeadDim) return std::nullopt;
  for (const std::uint32_t tile : {32u, 16u, 8u}) {
    if (shared_bytes(static_cast<std::uint32_t>(d), tile) <= device.info().max_shared_memory_bytes)
      return tile;
  }
  return std::nullopt;
}

Tensor fused_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                       const FusedAttentionParams& params, std::uint32_t tile) {
  if (k.dtype() != q.dtype() || v.dtype() != q.dtype() || q.dtype() == DType::I32) {
    throw Error(fmt::format(
        "fused attention: q '{}', k '{}' and v '{}' are {}, {} and {}; give them one float "
        "type (vkt::cast)",
        q.name(), k.name(), v.name(), to_string(q.dtype()), to_string(k.dtype()),
        to_string(v.dtype())));
  }
  const Shape sq = q.shape();
  const Geometry g = geometry(sq, k.shape());
  const std::int64_t rows = std::int64_t{g.matrices} * g.tq;
  // Half q, k and v give a half result (two to a word: D even), as autocast's
  // attention does; L stays f32, in the words after it.
  const DType o = is_half(q.dtype()) && g.d % 2 == 0 ? q.dtype() : DType::F32;
  const std::int64_t lse = o == DType::F32 ? rows : 2 * rows;  // L in o's elements
  const Tensor flat = q.graph().add_node(std::make_unique<FusedAttentionOp>(params, tile),
                                         {q, k, v}, Shape{rows * g.d + lse}, o);
  return q.graph().add_node(std::make_unique<AttentionResultOp>(params, tile), {flat, q, k, v}, sq,
                            o);
}

}  // namespace vkt::ops_detail
