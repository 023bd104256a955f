// flatten: a reshape to [N, everything else], so it shares its input's memory.
#include <fmt/format.h>

#include "../../vulkan/error.h"
#include "shape_ops.h"

namespace vkt {

Tensor flatten(const Tensor& x) {
  if (!x.valid()) throw Error("flatten: the input tensor is empty");
  const Shape& s = x.shape();
  if (s.rank() == 0) {
    throw Error(fmt::format(
        "flatten('{}'): a scalar has no batch dimension; flatten takes [N, ...] (rank 1 to 6)",
        x.name()));
  }
  return reshape(x, {s[0], s.elements() / s[0]});
}

}  // namespace vkt
