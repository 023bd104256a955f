// Losses (shaders/loss_values.comp, loss_sum.comp, loss_grad.comp,
// loss_sum_grad.comp). A loss and its reduction are one op: with the default
// reduction and no weights, the forward pass is one dispatch and the backward
// pass one more, where separate loss, multiply and reduce ops would take three
// or four each way; fused by the Executor, a small loss and its gradient are
// one dispatch in all.
#include "losses.h"

#include <fmt/format.h>

#include <optional>
#include <tuple>
#include <utility>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "elementwise.h"
#include "fold_axes.h"
#include "kernel_util.h"
#include "label_mask.h"
#include "shape_ops.h"

namespace vkt {
namespace {

// The codes of shaders/losses.glsl.
enum class LossKind : std::uint32_t { Squared, Absolute, Huber, SigmoidXent, SparseXent, Identity };

const char* name_of(LossKind k) {
  static const char* names[] = {
      "mean_squared_error",    "absolute_difference",          "huber",
      "sigmoid_cross_entropy", "sparse_softmax_cross_entropy", "weighted_loss"};
  return names[static_cast<int>(k)];
}

struct LossParams {
  LossKind kind;
  float delta = 0.0f;
  float scale = 1.0f;  ///< multiplies the sum (reduce) or each weighted element
  bool has_w = false;

  /// Data inputs before the optional weights: (labels, predictions) or (losses).
  std::size_t data() const { return kind == LossKind::Identity ? 1 : 2; }
};

struct LossPush {
  std::uint32_t n, classes, dy_step;
  float scale, delta;
  std::uint32_t pad[3];
  std::array<std::uint32_t, 4> dims, w_strides;
};

/// Bindings and push constants shared by the three kernels. `in` starts with
/// the data inputs; `weights` is the weights tensor (or none).
LossPush push_for(const LossParams& p, std::span<const Tensor> in, const Tensor& weights,
                  std::uint32_t dy_step) {
  const Tensor& x = in[p.data() - 1];
  const Shape& s = p.kind == LossKind::SparseXent ? in[0].shape() : x.shape();
  LossPush push{};
  push.n = static_cast<std::uint32_t>(s.elements());
  push.classes = p.kind == LossKind::SparseXent
                     ? static_cast<std::uint32_t>(x.shape()[x.shape().rank() - 1])
                     : 1;
  push.dy_step = dy_step;
  push.scale = p.scale;
  push.delta = p.delta;
  const std::array<Shape, 1> operands{weights.valid() ? weights.shape() : s};
  const auto fold = ops_detail::fold_broadcast_or_throw(s, operands, name_of(p.kind));
  push.dims = fold.dims;
  push.w_strides = fold.strides[0];
  return push;
}

/// `local` 0 keeps the shader's own workgroup size (loss_sum.comp's fixed 64).
const Kernel& loss_kernel(RecordContext& ctx, const char* shader, const LossParams& p,
                          std::uint32_t local, std::optional<bool> wrt_labels = std::nullopt) {
  KernelDesc desc{.shader = shader,
                  .local_size = {local, local ? 1u : 0u, local ? 1u : 0u},
                  .constants = {SpecConstant::u32(1, static_cast<std::uint32_t>(p.kind)),
                                SpecConstant::u32(2, p.has_w ? 1 : 0)}};
  if (wrt_labels) desc.constants.push_back(SpecConstant::u32(3, *wrt_labels ? 1 : 0));
  return ctx.device().kernel(desc);
}

/// Losses of at most this many gradient elements run with their gradient in
/// one kernel of one workgroup (loss_sum_grad.comp) when the Executor fuses
/// them: the loss's own sum is one workgroup already, and a few thousand more
/// elements cost it less than a second dispatch; past this the gradient's own
/// dispatch, spread over many workgroups, is faster.
constexpr std::int64_t kFusedLossElements = 16384;

/// Sparse cross-entropies whose logits have more elements than
/// kFusedLossElements take xent_rows.comp, a workgroup per row, where the
/// device runs rows by workgroup (ops_detail::row_workgroups): a summed loss
/// becomes per-row losses and their sum (two dispatches, the sum a
/// weighted_loss over the rows), as one workgroup, or one invocation per row,
/// walking a vocabulary leaves a GPU idle. Smaller ones keep the single fused
/// dispatch.
bool xent_rows(const Device& device, const LossParams& p, const Shape& logits) {
  return p.kind == LossKind::SparseXent && logits.elements() > kFusedLossElements &&
         ops_detail::row_workgroups(device, logits[logits.rank() - 1]);
}

/// xent_rows.comp for the gradient (`grad`) or the weighted per-row losses,
/// a workgroup per row (push.n rows); buffers (labels, logits, dy, weights, out).
void dispatch_xent_rows(RecordContext& ctx, const LossParams& p, bool grad,
                        std::initializer_list<BufferRange> buffers, const LossPush& push) {
  const Kernel& kernel = ctx.device().kernel(
      {.shader = "xent_rows",
       .local_size = {ops_detail::kRowLanes, 1, 1},
       .constants = {SpecConstant::u32(2, p.has_w ? 1 : 0), SpecConstant::u32(3, grad ? 1 : 0)}});
  ops_detail::dispatch_1d(ctx, kernel, buffers, push, std::int64_t{push.n} * ops_detail::kRowLanes);
}

/// d(loss op)/d(one data input); inputs (data..., dy, weights?).
class LossGradOp final : public Op {
 public:
  LossGradOp(LossParams p, bool summed, bool wrt_labels)
      : p_(p), summed_(summed), wrt_labels_(wrt_labels) {}
  std::string type() const override { return std::string(name_of(p_.kind)) + "_grad"; }
  bool absorbs(const Node& earlier, std::span<const Tensor> in, const Tensor& out) const override;
  void record_fused(RecordContext& ctx, const Node& earlier, std::span<const Tensor> in,
                    const Tensor& out) const override {
    const std::size_t d = p_.data();
    const Tensor weights = p_.has_w ? in[d + 1] : Tensor{};
    const LossPush push = push_for(p_, in, weights, 0);
    const BufferRange w = ctx.buffer(p_.has_w ? weights : in[d]);  // unread without weights
    const BufferRange labels = ctx.buffer(in[0]), x = ctx.buffer(in[d - 1]);
    ctx.stream().dispatch(
        loss_kernel(ctx, "loss_sum_grad", p_, 0),
        {labels, x, ctx.buffer(in[d]), w, ctx.buffer(earlier.output), ctx.buffer(out)}, push,
        Groups{1, 1, 1});
  }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const std::size_t d = p_.data();
    const Tensor& dy = in[d];
    const Tensor weights = p_.has_w ? in[d + 1] : Tensor{};
    const LossPush push = push_for(p_, in, weights, summed_ ? 0 : 1);
    const BufferRange w = ctx.buffer(p_.has_w ? weights : dy);  // unread without weights
    if (xent_rows(ctx.device(), p_, in[d - 1].shape())) {
      return dispatch_xent_rows(
          ctx, p_, true,
          {ctx.buffer(in[0]), ctx.buffer(in[d - 1]), ctx.buffer(dy), w, ctx.buffer(out)}, push);
    }
    ops_detail::dispatch_1d(
        ctx, loss_kernel(ctx, "loss_grad", p_, ops_detail::kLocalSize, wrt_labels_),
        {ctx.buffer(in[0]), ctx.buffer(in[d - 1]), ctx.buffer(dy), w, ctx.buffer(out)}, push,
        push.n);
  }
  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor&,
                                 const Tensor&) const override {
    throw Error(fmt::format("{}: second derivatives are not supported", type()));
  }

 private:
  LossParams p_;
  bool summed_;
  bool wrt_labels_;
};

/// Weighted per-element losses (shape S), or their scaled sum (a scalar) when
/// `summed`. Inputs (data..., weights?).
class LossOp final : public Op {
 public:
  LossOp(LossParams p, bool summed) : p_(p), summed_(summed) {}
  std::string type() const override { return name_of(p_.kind); }
  const LossParams& params() const { return p_; }
  bool summed() const { return summed_; }

  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const std::size_t d = p_.data();
    const Tensor weights = p_.has_w ? in[d] : Tensor{};
    const LossPush push = push_for(p_, in, weights, 0);
    const BufferRange x = ctx.buffer(in[d - 1]);
    const std::initializer_list<BufferRange> buffers{
        ctx.buffer(in[0]), x, p_.has_w ? ctx.buffer(weights) : x, ctx.buffer(out)};
    if (!summed_ && xent_rows(ctx.device(), p_, in[d - 1].shape())) {
      const BufferRange w = p_.has_w ? ctx.buffer(weights) : x;
      return dispatch_xent_rows(ctx, p_, false, {ctx.buffer(in[0]), x, x, w, ctx.buffer(out)},
                                push);
    }
    if (summed_) {
      // One workgroup: the sum is a tree over its invocations (loss_sum.comp).
      ctx.stream().dispatch(loss_kernel(ctx, "loss_sum", p_, 0), buffers, push, Groups{1, 1, 1});
    } else {
      ops_detail::dispatch_1d(ctx, loss_kernel(ctx, "loss_values", p_, ops_detail::kLocalSize),
                              buffers, push, push.n);
    }
  }

  std::vector<Gradient> gradient(std::span<const Tensor> in, const Tensor&,
                                 const Tensor& dy) const override {
    Graph& g = dy.graph();
    const std::size_t d = p_.data();
    std::vector<Tensor> grad_inputs(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(d));
    grad_inputs.push_back(dy);
    if (p_.has_w) grad_inputs.push_back(in[d]);
    std::vector<Gradient> out;
    for (std::size_t j = 0; j < d; ++j) {
      const bool labels = d == 2 && j == 0;
      if (labels && p_.kind == LossKind::SparseXent) {
        out.push_back(Gradient{});  // integer class labels
        continue;
      }
      out.push_back(Gradient{g.add_node(std::make_unique<LossGradOp>(p_, summed_, labels),
                                        grad_inputs, in[j].shape())});
    }
    if (p_.has_w) {
      // d/dw = scale * dy * (unweighted loss), summed over where w was broadcast.
      LossParams plain = p_;
      plain.scale = 1.0f;
      plain.has_w = false;
      const std::vector<Tensor> data(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(d));
      // Copies: Tensor::shape() refers into the graph, which new ops may move.
      const Shape s = p_.kind == LossKind::SparseXent ? in[0].shape() : in[d - 1].shape();
      const Shape w_shape = in[d].shape();
      Tensor dw = mul(g.add_node(std::make_unique<LossOp>(plain, false), data, s), dy);
      if (p_.scale != 1.0f) dw = dw * p_.scale;
      out.push_back(Gradient{sum_to(dw, w_shape)});
    }
    return out;
  }

 private:
  LossParams p_;
  bool summed_;
};

bool LossGradOp::absorbs(const Node& earlier, std::span<const Tensor> in, const Tensor& out) const {
  const auto* loss = dynamic_cast<const LossOp*>(earlier.op.get());
  if (loss == nullptr || !loss->summed() || !summed_ || wrt_labels_) return false;
  const LossParams& q = loss->params();
  if (q.kind != p_.kind || q.delta != p_.delta || q.scale != p_.scale || q.has_w != p_.has_w) {
    return false;
  }
  // Inputs (data..., dy, weights?) against the loss's (data..., weights?).
  const std::size_t d = p_.data();
  for (std::size_t i = 0; i < earlier.inputs.size(); ++i) {
    if (earlier.inputs[i] != in[i < d ? i : i + 1]) return false;
  }
  return out.shape().elements() <= kFusedLossElements;
}

std::string describe(const Tensor& t) {
  return fmt::format("'{}' {}", t.name(), t.shape().str());
}

void check_tensor(const Tensor& t, DType dtype, const char* role, const char* what) {
  if (!t.valid()) throw Error(fmt::format("{}: the {} tensor is empty", what, role));
  if (t.dtype() != dtype) {
    throw Error(fmt::format("{}: {} {} hold {} values; they must be {}", what, role, describe(t),
                            to_string(t.dtype()), to_string(dtype)));
  }
}

void check_same_graph(const Tensor& a, const Tensor& b, const char* what) {
  if (&a.graph() != &b.graph()) {
    throw Error(fmt::format("{}: '{}' and '{}' belong to different graphs (devices)", what,
                            a.name(), b.name()));
  }
}

/// Applies weights and the reduction to the loss `p` of `data` (per-element
/// shape `s`).
// The graph's example weights (Graph::example_weights: evaluation's padding
// rows 0) as the weights of an unweighted loss over [rows, ...], and the
// reduction that then means what it meant unweighted: each of the real rows'
// losses weighs 1, so every mean becomes the mean over the real rows.
std::optional<std::pair<Tensor, Reduction>> implied_weights(const Graph& g, const Shape& s,
                                                            Reduction reduction) {
  const Tensor& w = g.example_weights();
  if (!w.valid() || reduction == Reduction::None || s.rank() == 0 || s[0] != w.shape()[0]) {
    return std::nullopt;
  }
  std::vector<std::int64_t> dims(static_cast<std::size_t>(s.rank()), 1);
  dims[0] = s[0];
  return std::pair{reshape(w, Shape(dims)),
                   reduction == Reduction::Sum ? Reduction::Sum : Reduction::Mean};
}

Tensor reduce_loss(LossParams p, std::vector<Tensor> data, Shape s, Tensor weights,
                   Reduction reduction, const char* what) {
  Graph& g = data[0].graph();
  if (!weights.valid()) {
    if (const auto implied = implied_weights(g, s, reduction)) {
      std::tie(weights, reduction) = *implied;
    }
  }
  if (weights.valid()) {
    check_tensor(weights, DType::F32, "weights", what);
    check_same_graph(data[0], weights, what);
    const std::string ctx = fmt::format("{}: weights {}", what, describe(weights));
    if (broadcast_shapes(weights.shape(), s, ctx) != s) {
      throw Error(fmt::format("{} do not broadcast to the losses' shape {} (from {})", ctx, s.str(),
                              describe(data.back())));
    }
    const std::array<Shape, 1> operands{weights.shape()};
    ops_detail::fold_broadcast_or_throw(s, operands, ctx);
  }
  const float n = static_cast<float>(s.elements());
  const auto make = [&](LossParams q, bool summed) {
    std::vector<Tensor> inputs = data;
    if (q.has_w) inputs.push_back(weights);
    if (summed && xent_rows(g.device(), q, data.back().shape())) {
      // The weighted losses a workgroup per row, then their sum.
      const float scale = std::exchange(q.scale, 1.0f);
      const Tensor rows = g.add_node(std::make_unique<LossOp>(q, false), inputs, s);
      const LossParams sum{.kind = LossKind::Identity, .scale = scale};
      return g.add_node(std::make_unique<LossOp>(sum, true), {rows}, Shape{});
    }
    return g.add_node(std::make_unique<LossOp>(q, summed), inputs, summed ? Shape{} : s);
  };
  p.has_w = weights.valid();
  switch (reduction) {
    case Reduction::None:
      return make(p, false);
    case Reduction::Sum:
      return make(p, true);
    case Reduction::SumOverBatchSize:
      p.scale = 1.0f / n;
      return make(p, true);
    case Reduction::Mean:
    case Reduction::SumByNonzeroWeights:
      break;
  }
  if (!p.has_w) {  // every weight is 1: both denominators are n
    p.scale = 1.0f / n;
    return make(p, true);
  }
  const Tensor numerator = make(p, true);
  // Broadcasting repeats each weight n / |w| times, so the sum over the
  // broadcast shape is that multiple of the sum over the weights.
  const Tensor counted = reduction == Reduction::Mean ? weights : not_equal(weights, g.scalar(0));
  const LossParams sum_weights{.kind = LossKind::Identity,
                               .scale = n / static_cast<float>(weights.shape().elements())};
  const Tensor denominator =
      g.add_node(std::make_unique<LossOp>(sum_weights, true), {counted}, Shape{});
  return div_no_nan(numerator, denominator);
}

Tensor pointwise(LossKind kind, float delta, const Tensor& labels, const Tensor& predictions,
                 const Tensor& weights, Reduction reduction, const char* what,
                 const char* predictions_role = "predictions") {
  check_tensor(labels, DType::F32, "labels", what);
  check_tensor(predictions, DType::F32, predictions_role, what);
  check_same_graph(labels, predictions, what);
  if (labels.shape() != predictions.shape()) {
    throw Error(fmt::format("{}: labels {} and {} {} must have the same shape", what,
                            describe(labels), predictions_role, describe(predictions)));
  }
  return reduce_loss({.kind = kind, .delta = delta}, {labels, predictions}, labels.shape(), weights,
                     reduction, what);
}

}  // namespace

Tensor compute_weighted_loss(const Tensor& losses, const Tensor& weights, Reduction reduction,
                             const char* what) {
  check_tensor(losses, DType::F32, "losses", what);
  return reduce_loss({.kind = LossKind::Identity}, {losses}, losses.shape(), weights, reduction,
                     what);
}

Tensor mean_squared_error(const Tensor& labels, const Tensor& predictions, const Tensor& weights,
                          Reduction reduction) {
  return pointwise(LossKind::Squared, 0.0f, labels, predictions, weights, reduction,
                   "mean_squared_error");
}

Tensor absolute_difference(const Tensor& labels, const Tensor& predictions, const Tensor& weights,
                           Reduction reduction) {
  return pointwise(LossKind::Absolute, 0.0f, labels, predictions, weights, reduction,
                   "absolute_difference");
}

Tensor huber(const Tensor& labels, const Tensor& predictions, const Tensor& weights, float delta,
             Reduction reduction) {
  if (!(delta > 0.0f)) {
    throw Error(fmt::format("huber: delta is {}; it must be greater than 0", delta));
  }
  return pointwise(LossKind::Huber, delta, labels, predictions, weights, reduction, "huber");
}

Tensor sigmoid_cross_entropy(const Tensor& labels, const Tensor& logits, const Tensor& weights,
                             Reduction reduction) {
  return pointwise(LossKind::SigmoidXent, 0.0f, labels, logits, weights, reduction,
                   "sigmoid_cross_entropy", "logits");
}

Tensor sparse_softmax_cross_entropy(const Tensor& labels, const Tensor& logits,
                                    const Tensor& weights, Reduction reduction,
                                    std::optional<std::int32_t> ignore_index) {
  const char* what = "sparse_softmax_cross_entropy";
  check_tensor(labels, DType::I32, "labels", what);
  check_tensor(logits, DType::F32, "logits", what);
  check_same_graph(labels, logits, what);
  const Shape& ls = logits.shape();
  if (ls.rank() < 2) {
    throw Error(fmt::format("{}: logits {} need a batch axis and a class axis ([N, C])", what,
                            describe(logits)));
  }
  std::vector<std::int64_t> rows(ls.dims().begin(), ls.dims().end() - 1);
  if (labels.shape() != Shape(rows)) {
    throw Error(fmt::format(
        "{}: labels {} must have the shape of logits {} without its last axis, {}; reshape "
        "labels of shape [N, 1] to [N]",
        what, describe(labels), describe(logits), Shape(rows).str()));
  }
  if (!ignore_index) {
    return reduce_loss({.kind = LossKind::SparseXent}, {labels, logits}, labels.shape(), weights,
                       reduction, what);
  }
  // The ignored labels weigh 0 and read class 0 instead (a NaN times 0 would stay NaN).
  const auto [kept, cleaned] = ops_detail::ignore_labels(labels, *ignore_index);
  Tensor w = weights;
  if (!w.valid()) {
    if (const auto implied = implied_weights(labels.graph(), labels.shape(), reduction)) {
      std::tie(w, reduction) = *implied;
    }
  }
  if (w.valid()) {
    check_tensor(w, DType::F32, "weights", what);
    check_same_graph(labels, w, what);
    broadcast_shapes(
        w.shape(), labels.shape(),
        fmt::format("{}: weights {} and labels {}", what, describe(w), describe(labels)));
  }
  return reduce_loss({.kind = LossKind::SparseXent}, {cleaned, logits}, labels.shape(),
                     w.valid() ? w * kept : kept, reduction, what);
}

}  // namespace vkt
