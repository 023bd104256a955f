#pragma once
// Reverse-mode differentiation: builds the backward graph as more ops.

#include <vector>

#include "op.h"
#include "tensor.h"

namespace vkt {

/// d loss / d v for every v in `vars`, built as ops of the loss's graph. A
/// variable the loss does not reach gets an invalid Gradient (and a warning in
/// the log), never zeros. An embedding's variable gets a sparse Gradient. The
/// loss must be a scalar f32.
///
///   std::vector<vkt::Gradient> grads = vkt::gradients(loss, {w, b});
///   vkt::Executor step(g, {loss, grads[0].dense, grads[1].dense});
std::vector<Gradient> gradients(const Tensor& loss, const std::vector<Tensor>& vars);

}  // namespace vkt
