#include "autodiff.h"

#include <fmt/format.h>

#include <map>
#include <set>

#include "../vulkan/detail/log.h"
#include "../vulkan/error.h"
#include "graph.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/shape_ops.h"
#include "precision_scope.h"

namespace vkt {
namespace {

/// One tensor's gradient from all the contributions that reached it. Sparse
/// parts alone stay sparse (their rows and indices concatenated in contribution
/// order, duplicates kept); mixed with dense parts each sparse part is
/// densified where it stands, so the sum is taken in contribution order.
Gradient accumulate(const std::vector<Gradient>& parts, const Tensor& of) {
  if (parts.size() == 1) return parts.front();
  bool all_sparse = true;
  for (const Gradient& g : parts) all_sparse = all_sparse && g.sparse();
  if (all_sparse) {
    std::vector<Tensor> values, indices;
    for (const Gradient& g : parts) {
      values.push_back(g.values);
      indices.push_back(g.indices);
    }
    return Gradient{.values = concat(values, 0), .indices = concat(indices, 0)};
  }
  // A copy: Tensor::shape() refers into the graph, which new ops may move.
  const Shape shape = of.shape();
  std::vector<Tensor> dense;
  for (const Gradient& g : parts) {
    if (!g.sparse()) {
      dense.push_back(g.dense);
      continue;
    }
    const std::int64_t k = g.values.shape()[0];
    const Tensor rows = reshape(g.values, Shape{k, g.values.shape().elements() / k});
    dense.push_back(reshape(scatter_add_dense(rows, g.indices, shape[0]), shape));
  }
  // A split's pieces each send back a zero-padded block: one op, not k additions.
  dense = merge_padded(dense);
  Tensor sum = dense.front();
  for (std::size_t i = 1; i < dense.size(); ++i) sum = add(sum, dense[i]);
  return Gradient{sum};
}

/// The gradient tensor of `var` in memory of its own, so the Executor can place
/// it in the gradient arena (a view, an input or another variable's gradient
/// gets a copy).
Tensor own(Graph& g, const Tensor& t) {
  const TensorInfo& info = g.info(t);
  const bool view = info.kind == TensorKind::Op && g.nodes()[info.node].op->view_offset();
  if (info.kind != TensorKind::Op || view || info.gradient_of >= 0) return identity(t);
  return t;
}

}  // namespace

std::vector<Gradient> gradients(const Tensor& loss, const std::vector<Tensor>& vars) {
  if (!loss.valid()) throw Error("gradients: the loss tensor is empty");
  Graph& g = loss.graph();
  if (loss.shape().elements() != 1 || loss.dtype() != DType::F32) {
    throw Error(
        fmt::format("gradients: the loss '{}' has shape {} ({}); it must be a scalar f32. "
                    "Reduce it first, e.g. with reduce_mean or reduce_sum",
                    loss.name(), loss.shape().str(), to_string(loss.dtype())));
  }
  for (const Tensor& v : vars) {
    if (!v.valid() || &v.graph() != &g) {
      throw Error("gradients: a variable belongs to another graph than the loss");
    }
  }

  // Nodes that lead to the loss, and tensors that depend on some variable.
  std::set<int> to_loss;
  std::vector<int> stack;
  if (g.info(loss).node >= 0) stack.push_back(g.info(loss).node);
  while (!stack.empty()) {
    const int n = stack.back();
    stack.pop_back();
    if (!to_loss.insert(n).second) continue;
    for (const Tensor& in : g.nodes()[n].inputs) {
      if (g.info(in).node >= 0) stack.push_back(g.info(in).node);
    }
  }
  std::set<int> from_vars;
  for (const Tensor& v : vars) from_vars.insert(v.id());
  for (int n : to_loss) {  // ascending = topological order
    for (const Tensor& in : g.nodes()[n].inputs) {
      if (from_vars.count(in.id())) from_vars.insert(g.nodes()[n].output.id());
    }
  }

  const int node_count = static_cast<int>(g.nodes().size());
  std::map<int, std::vector<Gradient>> parts;
  parts[loss.id()].push_back(Gradient{g.constant(loss.shape(), std::vector<float>{1.0f})});
  for (int n = node_count - 1; n >= 0; --n) {
    if (!to_loss.count(n)) continue;
    // Copies: building gradient ops grows the node list, which may move it.
    const std::vector<Tensor> inputs = g.nodes()[n].inputs;
    const Tensor output = g.nodes()[n].output;
    const Op* op = g.nodes()[n].op.get();
    if (!from_vars.count(output.id()) || !parts.count(output.id())) continue;
    const Gradient dy = accumulate(parts[output.id()], output);
    if (dy.sparse()) {
      throw Error(fmt::format("gradients: '{}' received a sparse gradient but is not a variable",
                              output.name()));
    }
    // A node's gradient computes as the node did: under the policy in effect
    // when it was built, not the one in effect now.
    const PrecisionScope precision(g, g.nodes()[n].precision);
    const std::vector<Gradient> dx = op->gradient(inputs, output, dy.dense);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      if (dx[i].valid() && from_vars.count(inputs[i].id())) parts[inputs[i].id()].push_back(dx[i]);
    }
  }

  std::vector<Gradient> result;
  for (const Tensor& v : vars) {
    if (!parts.count(v.id()) || v == loss) {
      detail::log().warn("gradients: the loss '{}' does not depend on '{}'; it gets no gradient",
                         loss.name(), v.name());
      result.push_back(Gradient{});
      continue;
    }
    Gradient grad = accumulate(parts[v.id()], v);
    for (Tensor* t : {&grad.dense, &grad.values, &grad.indices}) {
      if (!t->valid()) continue;
      *t = own(g, *t);
      g.info_mutable(*t).gradient_of = v.id();
    }
    result.push_back(grad);
  }
  return result;
}

}  // namespace vkt
