// reshape: a view on its input's memory; records nothing.
#include <fmt/format.h>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "shape_ops.h"

namespace vkt {
namespace {

class ReshapeOp final : public Op {
 public:
  std::string type() const override { return "reshape"; }
  void record(RecordContext&, std::span<const Tensor>, const Tensor&) const override {}
  std::vector<Gradient> gradient(std::span<const Tensor> in, const Tensor&,
                                 const Tensor& dy) const override {
    return {Gradient{reshape(dy, in[0].shape())}};
  }
  std::optional<std::size_t> view_offset() const override { return 0; }
  bool takes_half() const override { return true; }
};

}  // namespace

Tensor reshape(const Tensor& x, const Shape& shape) {
  if (!x.valid()) throw Error("reshape: the input tensor is empty");
  if (x.shape().elements() != shape.elements()) {
    throw Error(fmt::format("reshape('{}'): shape {} has {} elements and cannot become {} with {}",
                            x.name(), x.shape().str(), x.shape().elements(), shape.str(),
                            shape.elements()));
  }
  if (x.shape() == shape) return x;
  return x.graph().add_node(std::make_unique<ReshapeOp>(), {x}, shape, x.dtype());
}

}  // namespace vkt
