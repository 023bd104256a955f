// matmul_bias_act and its gradient ops (dense_fused.h): the kernels are matmul's
// texel and tiled ones with hooks (shaders/matmul_bias_act_*, matmul_dact_*),
// picked as matmul.cpp picks its own, and dense_pre_grad.comp /
// dense_bias_grad.comp for the activation's gradient.
#include "dense_fused.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "elementwise.h"
#include "kernel_util.h"
#include "matmul.h"
#include "matmul_tiles.h"
#include "texel_view.h"

namespace vkt {
namespace {

using layers::Activation;
using matmul_detail::texel_view;

// Which operand of a backward product is dy (shaders/matmul_dact_*).
enum class DyOperand : std::uint32_t { A = 0, B = 1, None = 2 };

struct TiledPush {
  std::uint32_t m, n, k;
};
struct TexelPush {
  std::uint32_t m, n, k, a_last, b_last;
};
struct DactTexelPush {
  std::uint32_t m, n, k, a_last, b_last, y_last;
};
struct BiasGradPush {
  std::uint32_t rows, n;
};

constexpr std::uint32_t kTreeRows = 256;  // reduce.cpp's kMinRows

std::uint32_t last_texel(const BufferRange& r) {
  return static_cast<std::uint32_t>(r.size() / 16 - 1);
}

/// One fused product op(a) * op(b) -> c: the forward (`extra` is the bias)
/// or a backward product (`extra` is y, the layer's output).
struct FusedProduct {
  const char* family;  // "matmul_bias_act" or "matmul_dact"
  std::uint32_t m, n, k;
  bool ta, tb;
  Activation act;
  DyOperand dy;
  BufferRange a, b, extra, c;

  void record(RecordContext& ctx) const {
    Device& device = ctx.device();
    if (matmul_variant(device) == MatmulVariant::Texel) {
      const auto va = texel_view(device, a), vb = texel_view(device, b);
      const auto vy =
          dy == DyOperand::None ? std::optional<BufferRange>(extra) : texel_view(device, extra);
      if (va && vb && vy) return record_texel(ctx, *va, *vb, *vy);
    }
    record_tiled(ctx);
  }

  void record_texel(RecordContext& ctx, const BufferRange& va, const BufferRange& vb,
                    const BufferRange& vextra) const {
    // matmul's block choice, so that both run the same register blocks.
    const matmul_detail::TexelBlock block = matmul_detail::texel_block(m, n);
    const std::uint32_t a_row = ta ? m : k, b_row = tb ? k : n;
    std::vector<SpecConstant> constants = {block.lanes_constant(),
                                           SpecConstant::u32(2, ta),
                                           SpecConstant::u32(3, tb),
                                           SpecConstant::u32(4, a_row % 4 == 0),
                                           SpecConstant::u32(5, b_row % 4 == 0),
                                           SpecConstant::u32(6, static_cast<std::uint32_t>(act))};
    if (dy != DyOperand::None)
      constants.push_back(SpecConstant::u32(7, static_cast<std::uint32_t>(dy)));
    const Kernel& kernel =
        ctx.device().kernel({.shader = fmt::format("{}_texel_{}", family, block.suffix()),
                             .local_size = {matmul_detail::kTexelLanes, 1, 1},
                             .constants = constants});
    const Groups groups = block.groups();
    if (dy == DyOperand::None) {
      ctx.stream().dispatch(kernel, {va, vb, c, vextra},
                            TexelPush{m, n, k, last_texel(va), last_texel(vb)}, groups);
    } else {
      ctx.stream().dispatch(
          kernel, {va, vb, c, vextra},
          DactTexelPush{m, n, k, last_texel(va), last_texel(vb), last_texel(vextra)}, groups);
    }
  }

  void record_tiled(RecordContext& ctx) const {
    const TiledShape t = tiled_shape_for(ctx.device(), m, n);
    std::vector<SpecConstant> constants = t.constants();
    constants.push_back(SpecConstant::u32(7, ta));
    constants.push_back(SpecConstant::u32(8, tb));
    constants.push_back(SpecConstant::u32(9, static_cast<std::uint32_t>(act)));
    if (dy != DyOperand::None)
      constants.push_back(SpecConstant::u32(10, static_cast<std::uint32_t>(dy)));
    const Kernel& kernel = ctx.device().kernel({.shader = fmt::format("{}_tiled", family),
                                                .local_size = t.local_size(),
                                                .constants = constants});
    ctx.stream().dispatch(kernel, {a, b, c, extra}, TiledPush{m, n, k}, t.groups(m, n));
  }
};

std::uint32_t u32(std::int64_t v) {
  return static_cast<std::uint32_t>(v);
}

/// dense_pre_grad.comp: dpre from (dy, y), and with `sum` its column sums into `db`.
void record_pre_grad(RecordContext& ctx, Activation act, std::span<const Tensor> in,
                     const Tensor& dpre, const Tensor& db, bool sum) {
  const std::uint32_t rows = u32(in[0].shape()[0]), n = u32(in[0].shape()[1]);
  const Kernel& kernel =
      ctx.device().kernel({.shader = "dense_pre_grad",
                           .local_size = {ops_detail::kRowLanes, 1, 1},
                           .constants = {SpecConstant::u32(1, static_cast<std::uint32_t>(act)),
                                         SpecConstant::u32(2, sum ? 1 : 0)}});
  ops_detail::dispatch_1d(ctx, kernel,
                          {ctx.buffer(in[0]), ctx.buffer(in[1]), ctx.buffer(dpre), ctx.buffer(db)},
                          BiasGradPush{rows, n}, n);
}

/// dy * act'(y) summed over rows into the bias gradient; inputs (dy, y).
class DenseBiasGradOp final : public Op {
 public:
  explicit DenseBiasGradOp(Activation act) : act_(act) {}
  std::string type() const override { return "dense_bias_grad"; }
  /// Absorbs the layer's dpre: one pass writes both.
  bool absorbs(const Node& earlier, std::span<const Tensor> in, const Tensor&) const override;
  void record_fused(RecordContext& ctx, const Node& earlier, std::span<const Tensor> in,
                    const Tensor& out) const override {
    record_pre_grad(ctx, act_, in, earlier.output, out, true);
  }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const std::uint32_t n = u32(out.shape().elements());
    const std::uint32_t rows = u32(in[0].shape().elements()) / n;
    // A workgroup per output where the rows are many and the outputs few, as
    // reduce_sum picks reduce_rows.comp; else an invocation per output.
    const bool tree = rows >= kTreeRows && n <= rows;
    const Kernel& kernel =
        ctx.device().kernel({.shader = "dense_bias_grad",
                             .local_size = {ops_detail::kRowLanes, 1, 1},
                             .constants = {SpecConstant::u32(1, static_cast<std::uint32_t>(act_)),
                                           SpecConstant::u32(2, tree)}});
    const std::initializer_list<BufferRange> buffers{ctx.buffer(in[0]), ctx.buffer(in[1]),
                                                     ctx.buffer(out)};
    if (!tree) {
      ops_detail::dispatch_1d(ctx, kernel, buffers, BiasGradPush{rows, n}, n);
      return;
    }
    // Past 65535 outputs the workgroups wrap into y, as reduce_rows' do.
    const std::uint32_t x_groups = std::min<std::uint32_t>(n, 65535);
    ctx.stream().dispatch(kernel, buffers, BiasGradPush{rows, n},
                          Groups{x_groups, (n + x_groups - 1) / x_groups, 1});
  }
  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor&,
                                 const Tensor&) const override {
    throw Error("dense_bias_grad: second derivatives are not supported");
  }

 private:
  Activation act_;
};

/// dpre = dy * act'(y); inputs (dy, y). The Executor fuses it with the bias
/// gradient (DenseBiasGradOp), which then writes both in one pass.
class DensePreGradOp final : public Op {
 public:
  explicit DensePreGradOp(Activation act) : act_(act) {}
  std::string type() const override { return "dense_pre_grad"; }
  Activation activation() const { return act_; }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    record_pre_grad(ctx, act_, in, out, out, false);
  }
  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor&,
                                 const Tensor&) const override {
    throw Error("dense_pre_grad: second derivatives are not supported");
  }

 private:
  Activation act_;
};

/// op(a) * op(b) with dy (input `dy` names which) times act'(y); inputs (a, b, y).
class DactMatmulOp final : public Op {
 public:
  DactMatmulOp(Activation act, DyOperand dy, bool ta, bool tb)
      : act_(act), dy_(dy), ta_(ta), tb_(tb) {}
  std::string type() const override { return "matmul_dact"; }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const FusedProduct p{.family = "matmul_dact",
                         .m = u32(out.shape()[0]),
                         .n = u32(out.shape()[1]),
                         .k = u32(in[0].shape()[ta_ ? 0 : 1]),
                         .ta = ta_,
                         .tb = tb_,
                         .act = act_,
                         .dy = dy_,
                         .a = ctx.buffer(in[0]),
                         .b = ctx.buffer(in[1]),
                         .extra = ctx.buffer(in[2]),
                         .c = ctx.buffer(out)};
    p.record(ctx);
  }
  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor&,
                                 const Tensor&) const override {
    throw Error("matmul_dact: second derivatives are not supported");
  }

 private:
  Activation act_;
  DyOperand dy_;
  bool ta_, tb_;
};

bool DenseBiasGradOp::absorbs(const Node& earlier, std::span<const Tensor> in,
                              const Tensor&) const {
  const auto* pre = dynamic_cast<const DensePreGradOp*>(earlier.op.get());
  return pre != nullptr && pre->activation() == act_ && earlier.inputs.size() == 2 &&
         earlier.inputs[0] == in[0] && earlier.inputs[1] == in[1];
}

/// act(x * w + bias); inputs (x, w, bias).
class MatmulBiasActOp final : public Op {
 public:
  MatmulBiasActOp(Activation act, DenseBackward backward) : act_(act), backward_(backward) {}
  std::string type() const override { return "matmul_bias_act"; }

  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const FusedProduct p{.family = "matmul_bias_act",
                         .m = u32(out.shape()[0]),
                         .n = u32(out.shape()[1]),
                         .k = u32(in[0].shape()[1]),
                         .ta = false,
                         .tb = false,
                         .act = act_,
                         .dy = DyOperand::None,
                         .a = ctx.buffer(in[0]),
                         .b = ctx.buffer(in[1]),
                         .extra = ctx.buffer(in[2]),
                         .c = ctx.buffer(out)};
    p.record(ctx);
  }

  std::vector<Gradient> gradient(std::span<const Tensor> in, const Tensor& out,
                                 const Tensor& dy) const override {
    // Copies: shapes refer into the graph, which new ops may move.
    const Tensor x = in[0], w = in[1], y = out;
    const Shape x_shape = x.shape(), w_shape = w.shape(), b_shape = in[2].shape();
    if (act_ == Activation::None) {
      return {Gradient{matmul(dy, w, false, true)}, Gradient{matmul(x, dy, true, false)},
              Gradient{sum_to(dy, b_shape)}};
    }
    Graph& g = dy.graph();
    if (backward_ == DenseBackward::Materialized) {
      // Two ops (an op has one output), one kernel when the Executor fuses:
      // the bias gradient is an op's own output, so it needs no copy into the
      // gradient arena, as a view of a combined output would.
      const Shape dy_shape = dy.shape();
      const Tensor dpre = g.add_node(std::make_unique<DensePreGradOp>(act_), {dy, y}, dy_shape);
      const Tensor db = g.add_node(std::make_unique<DenseBiasGradOp>(act_), {dy, y}, b_shape);
      return {Gradient{matmul(dpre, w, false, true)}, Gradient{matmul(x, dpre, true, false)},
              Gradient{db}};
    }
    const Tensor dx = g.add_node(std::make_unique<DactMatmulOp>(act_, DyOperand::A, false, true),
                                 {dy, w, y}, x_shape);
    const Tensor dw = g.add_node(std::make_unique<DactMatmulOp>(act_, DyOperand::B, true, false),
                                 {x, dy, y}, w_shape);
    const Tensor db = g.add_node(std::make_unique<DenseBiasGradOp>(act_), {dy, y}, b_shape);
    return {Gradient{dx}, Gradient{dw}, Gradient{db}};
  }

 private:
  Activation act_;
  DenseBackward backward_;
};

}  // namespace

bool fuses_activation(Activation activation) {
  switch (activation) {
    case Activation::None:
    case Activation::Relu:
    case Activation::Sigmoid:
    case Activation::Tanh:
    case Activation::Elu:
    case Activation::LeakyRelu:
    case Activation::Softplus:
      return true;
    case Activation::Gelu:
      return false;
  }
  return false;
}

Tensor matmul_bias_act(const Tensor& x, const Tensor& w, const Tensor& bias, Activation activation,
                       DenseBackward backward) {
  if (!x.valid() || !w.valid() || !bias.valid())
    throw Error("matmul_bias_act: an input tensor is empty");
  const std::string what =
      fmt::format("matmul_bias_act('{}', '{}', '{}')", x.name(), w.name(), bias.name());
  if (&x.graph() != &w.graph() || &x.graph() != &bias.graph()) {
    throw Error(
        fmt::format("{}: the tensors belong to different graphs (devices); copy them "
                    "to one first",
                    what));
  }
  for (const Tensor* t : {&x, &w, &bias}) {
    if (t->dtype() != DType::F32)
      throw Error(
          fmt::format("{}: '{}' {}; it takes f32", what, t->name(), ops_detail::not_f32(*t)));
  }
  const Shape &xs = x.shape(), &ws = w.shape(), &bs = bias.shape();
  if (xs.rank() != 2 || ws.rank() != 2 || bs.rank() != 1 || xs[1] != ws[0] || bs[0] != ws[1]) {
    throw Error(fmt::format("{}: needs x [M, K], w [K, N] and bias [N], got {}, {} and {}", what,
                            xs.str(), ws.str(), bs.str()));
  }
  if (!fuses_activation(activation)) {
    throw Error(
        fmt::format("{}: activation {} cannot be fused (its gradient needs the "
                    "pre-activation); pass Activation::None and apply it after",
                    what, static_cast<int>(activation)));
  }
  const Shape out{xs[0], ws[1]};
  return x.graph().add_node(std::make_unique<MatmulBiasActOp>(activation, backward), {x, w, bias},
                            out);
}

}  // namespace vkt
