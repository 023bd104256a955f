// repeat_kv: reshape to [B, Hkv, 1, T, D], broadcast along the new axis,
// reshape to [B, Hkv * n_rep, T, D]; autodiff makes the gradient a sum_to.
#include "repeat_kv.h"

#include <fmt/format.h>

#include "../../vulkan/error.h"
#include "../graph.h"
#include "elementwise.h"
#include "kernel_util.h"
#include "shape_ops.h"

namespace vkt {

Tensor repeat_kv(const Tensor& x, std::int64_t n_rep) {
  if (!x.valid()) throw Error("repeat_kv: the input tensor is empty");
  const std::string what = fmt::format("repeat_kv('{}' {} {}, n_rep {})", x.name(),
                                       to_string(x.dtype()), x.shape().str(), n_rep);
  if (x.dtype() != DType::F32) throw Error(what + ": x " + ops_detail::not_f32(x));
  if (x.shape().rank() != 4) throw Error(what + ": x must be [B, Hkv, T, D]");
  if (n_rep < 1) throw Error(what + ": n_rep must be at least 1");
  if (n_rep == 1) return x;
  const Shape& s = x.shape();
  const Tensor grouped = reshape(x, Shape{s[0], s[1], 1, s[2], s[3]});
  const Tensor copies = broadcast_to(grouped, Shape{s[0], s[1], n_rep, s[2], s[3]});
  return reshape(copies, Shape{s[0], s[1] * n_rep, s[2], s[3]});
}

}  // namespace vkt
