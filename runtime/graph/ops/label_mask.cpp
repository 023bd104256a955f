// ignore_labels (shaders/label_mask.comp): the weights and the cleaned labels
// of a loss's ignore_index.
#include "label_mask.h"

#include "../graph.h"
#include "kernel_util.h"

namespace vkt::ops_detail {
namespace {

struct LabelMaskPush {
  std::uint32_t n;
  std::int32_t ignore;
};

class LabelMaskOp final : public Op {
 public:
  LabelMaskOp(std::int32_t ignore, bool weights) : ignore_(ignore), weights_(weights) {}
  std::string type() const override { return weights_ ? "label_weights" : "label_cleaned"; }
  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const std::int64_t n = out.shape().elements();
    dispatch_1d(ctx, kernel_1d(ctx, "label_mask", weights_ ? 0u : 1u),
                {ctx.buffer(in[0]), ctx.buffer(out)},
                LabelMaskPush{static_cast<std::uint32_t>(n), ignore_}, n);
  }
  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor&,
                                 const Tensor&) const override {
    return {Gradient{}};  // labels take no gradient
  }

 private:
  std::int32_t ignore_;
  bool weights_;
};

}  // namespace

std::pair<Tensor, Tensor> ignore_labels(const Tensor& labels, std::int32_t ignore) {
  Graph& g = labels.graph();
  return {g.add_node(std::make_unique<LabelMaskOp>(ignore, true), {labels}, labels.shape()),
          g.add_node(std::make_unique<LabelMaskOp>(ignore, false), {labels}, labels.shape(),
                     DType::I32)};
}

}  // namespace vkt::ops_detail
