// FrozenScope, and the layers' reading of frozen half weights.
#include "frozen_scope.h"

#include <fmt/format.h>

#include "../vulkan/error.h"
#include "ops/cast.h"

namespace vkt {

FrozenScope::FrozenScope(Graph& graph, DType dtype) : graph_(graph), before_(graph.frozen_dtype_) {
  if (dtype != DType::F32 && !is_half(dtype)) {
    throw Error(fmt::format("FrozenScope: weights are frozen as f32, f16 or bf16, not {}",
                            to_string(dtype)));
  }
  graph_.frozen_dtype_ = dtype;
}

FrozenScope::~FrozenScope() {
  graph_.frozen_dtype_ = before_;
}

Tensor layer_weight(const Tensor& variable) {
  return is_half(variable.dtype()) ? cast(variable, DType::F32) : variable;
}

}  // namespace vkt
