// cross_replica_sum: no kernel; the Executor exchanges it (Op::sums_across_replicas).
#include "cross_replica.h"

#include <fmt/format.h>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "kernel_util.h"

namespace vkt {
namespace {

class CrossReplicaSumOp final : public Op {
 public:
  std::string type() const override { return "cross_replica_sum"; }
  void record(RecordContext&, std::span<const Tensor>, const Tensor&) const override {
    throw Error("internal: cross_replica_sum is exchanged by the Executor, not recorded");
  }
  std::vector<Gradient> gradient(std::span<const Tensor>, const Tensor&,
                                 const Tensor& dy) const override {
    return {Gradient{cross_replica_sum(dy)}};
  }
  bool sums_across_replicas() const override { return true; }
};

}  // namespace

Tensor cross_replica_sum(const Tensor& x) {
  if (!x.valid()) throw Error("cross_replica_sum: the input tensor is empty");
  if (x.dtype() != DType::F32) {
    throw Error(fmt::format("cross_replica_sum('{}'): the input {}; it sums f32", x.name(),
                            ops_detail::not_f32(x)));
  }
  return x.graph().add_node(std::make_unique<CrossReplicaSumOp>(), {x}, x.shape());
}

}  // namespace vkt
