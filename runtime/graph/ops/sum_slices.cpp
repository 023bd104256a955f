// sum_slices (shaders/sum_slices.comp): see sum_slices.h.
#include "sum_slices.h"

#include "../graph.h"
#include "kernel_util.h"

namespace vkt::ops_detail {
namespace {

struct SumSlicesPush {
  std::uint32_t n, slices;
};

class SumSlicesOp final : public Op {
 public:
  explicit SumSlicesOp(SliceGradients gradients) : gradients_(std::move(gradients)) {}
  std::string type() const override { return "sum_slices"; }
  /// The product's operands are only named (a conv's may be stored in half);
  /// the partial sums it adds are f32.
  bool takes_half() const override { return true; }

  void record(RecordContext& ctx, std::span<const Tensor> in, const Tensor& out) const override {
    const std::int64_t n = out.shape().elements();
    const Kernel& kernel =
        ctx.device().kernel({.shader = "sum_slices", .local_size = {kLocalSize, 1, 1}});
    dispatch_1d(
        ctx, kernel, {ctx.buffer(in[0]), ctx.buffer(out)},
        SumSlicesPush{static_cast<std::uint32_t>(n), static_cast<std::uint32_t>(in[0].shape()[0])},
        n);
  }

  std::vector<Gradient> gradient(std::span<const Tensor> in, const Tensor&,
                                 const Tensor& dy) const override {
    std::vector<Gradient> result{Gradient{}};  // none to the partial sums
    for (Gradient& g : gradients_(in.subspan(1), dy)) result.push_back(std::move(g));
    return result;
  }

 private:
  SliceGradients gradients_;
};

}  // namespace

Tensor sum_slices(const Tensor& partials, std::vector<Tensor> operands, const Shape& shape,
                  SliceGradients gradients) {
  operands.insert(operands.begin(), partials);
  return partials.graph().add_node(std::make_unique<SumSlicesOp>(std::move(gradients)),
                                   std::move(operands), shape);
}

}  // namespace vkt::ops_detail
