// layers::max_pool2d, avg_pool2d, global_avg_pool and flatten: the ops under
// layer names, so a model reads as a list of layers.
#include "layers.h"
#include "pool.h"
#include "shape_ops.h"

namespace vkt::layers {

Tensor max_pool2d(const Tensor& x, const Pool2dOptions& options) {
  return vkt::max_pool2d(x, options);
}

Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& options) {
  return vkt::avg_pool2d(x, options);
}

Tensor global_avg_pool(const Tensor& x) {
  return vkt::global_avg_pool(x);
}

Tensor flatten(const Tensor& x) {
  return vkt::flatten(x);
}

}  // namespace vkt::layers
