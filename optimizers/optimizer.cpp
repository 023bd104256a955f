#include "optimizer.h"

#include <fmt/format.h>

#include <set>

#include "../runtime/graph/autodiff.h"
#include "../runtime/graph/graph.h"
#include "../runtime/graph/ops/elementwise.h"
#include "../runtime/graph/ops/embedding.h"
#include "../runtime/graph/ops/shape_ops.h"
#include "../runtime/vulkan/error.h"
#include "apply_op.h"

namespace vkt {

Optimizer::Optimizer(std::string name, LearningRate lr, Clipping clipping)
    : name_(std::move(name)), lr_(std::move(lr)), clipping_(clipping) {
  if (name_.empty()) throw Error("an optimizer needs a name (it names its slots)");
  if (clipping_.value < 0 || clipping_.global_norm < 0) {
    throw Error(
        fmt::format("optimizer '{}': clipping thresholds must be positive (0 turns "
                    "clipping off)",
                    name_));
  }
}

Tensor Optimizer::minimize(const Tensor& loss, std::optional<std::vector<Tensor>> var_list) {
  return apply_gradients(compute_gradients(loss, std::move(var_list)));
}

std::vector<GradVar> Optimizer::compute_gradients(const Tensor& loss,
                                                  std::optional<std::vector<Tensor>> var_list) {
  if (!loss.valid()) throw Error(fmt::format("optimizer '{}': the loss tensor is empty", name_));
  std::vector<Tensor> vars = var_list ? *var_list : loss.graph().trainable_variables();
  if (vars.empty()) {
    throw Error(fmt::format(
        "optimizer '{}': {} to optimize; pass the variables to train in "
        "var_list",
        name_,
        var_list ? "var_list is empty: there is nothing" : "the graph has no trainable variable"));
  }
  for (const Tensor& v : vars) {
    if (!v.valid() || &v.graph() != &loss.graph() ||
        loss.graph().info(v).kind != TensorKind::Variable) {
      throw Error(
          fmt::format("optimizer '{}': var_list entry '{}' is not a variable of the loss's "
                      "graph",
                      name_, v.valid() ? v.name() : "(empty)"));
    }
  }
  const std::vector<Gradient> grads = gradients(loss, vars);
  std::vector<GradVar> out;
  for (std::size_t i = 0; i < vars.size(); ++i) {
    if (grads[i].valid()) out.push_back({grads[i], vars[i]});
  }
  return out;
}

Tensor Optimizer::apply_gradients(const std::vector<GradVar>& grads_and_vars) {
  if (grads_and_vars.empty()) {
    throw Error(
        fmt::format("optimizer '{}': no gradients to apply (the loss reaches none of the "
                    "variables, or the list is empty)",
                    name_));
  }
  Graph& g = grads_and_vars.front().var.graph();
  const std::vector<std::string> names = slot_names();
  std::set<int> seen;
  for (const GradVar& gv : grads_and_vars) {
    if (!gv.var.valid() || &gv.var.graph() != &g || g.info(gv.var).kind != TensorKind::Variable) {
      throw Error(
          fmt::format("optimizer '{}': every entry must pair a gradient with a variable of "
                      "one graph",
                      name_));
    }
    if (!seen.insert(gv.var.id()).second) {
      throw Error(fmt::format("optimizer '{}': variable '{}' appears twice in one call", name_,
                              gv.var.name()));
    }
    if (gv.grad.sparse()) {
      if (gv.var.shape().rank() < 1 || gv.grad.values.shape().rank() < 1 ||
          gv.grad.values.shape()[0] != gv.grad.indices.shape().elements()) {
        throw Error(fmt::format("optimizer '{}': the sparse gradient of '{}' does not match it",
                                name_, gv.var.name()));
      }
      continue;
    }
    if (!gv.grad.valid() || gv.grad.dense.shape() != gv.var.shape()) {
      throw Error(fmt::format("optimizer '{}': the gradient of '{}' must have its shape {}", name_,
                              gv.var.name(), gv.var.shape().str()));
    }
  }

  // Gradients must sit in the gradient arena; one handed in by the user that is
  // not an autodiff gradient gets a copy there.
  std::vector<Tensor> grads;
  for (const GradVar& gv : grads_and_vars) {
    // Sparse rows (an embedding's) are summed into a dense gradient: the update
    // then has the dense formula's semantics for every row (TensorFlow's Adam
    // with sparse gradients behaves so; lazy, touched-rows-only updates are not
    // built yet).
    Tensor grad =
        gv.grad.sparse()
            ? reshape(scatter_add_dense(
                          reshape(gv.grad.values, {gv.grad.indices.shape().elements(),
                                                   gv.var.shape().elements() / gv.var.shape()[0]}),
                          gv.grad.indices, gv.var.shape()[0]),
                      gv.var.shape())
            : gv.grad.dense;
    const TensorInfo& info = g.info(grad);
    const bool view = info.kind == TensorKind::Op && g.nodes()[info.node].op->view_offset();
    if (info.gradient_of < 0 || view) {
      grad = identity(grad);
      g.info_mutable(grad).gradient_of = gv.var.id();
    }
    grads.push_back(grad);
  }

  std::vector<Tensor> inputs;
  const bool norm = clipping_.global_norm > 0;
  if (norm) inputs.push_back(detail::global_norm(grads));
  for (std::size_t i = 0; i < grads_and_vars.size(); ++i) {
    const Tensor& var = grads_and_vars[i].var;
    std::vector<Tensor>& slots = slots_[{&g, var.id()}];
    if (slots.empty()) {
      for (const std::string& slot : names) {
        const std::string slot_name = fmt::format("{}/{}/{}", var.name(), name_, slot);
        if (g.find_variable(slot_name)) {
          throw Error(
              fmt::format("optimizer '{}': slot '{}' already exists; two optimizers of the "
                          "same name update '{}': give them different names",
                          name_, slot_name, var.name()));
        }
        slots.push_back(g.variable(slot_name, var.shape(),
                                   Initializer::constant(slot_initial_value(slot)), false));
      }
    }
    inputs.push_back(var);
    inputs.push_back(grads[i]);
    inputs.insert(inputs.end(), slots.begin(), slots.end());
  }
  return g.add_node(std::make_unique<detail::ApplyOp>(shader(), step_values(), clipping_,
                                                      grads_and_vars.size(), names.size(), norm),
                    inputs, Shape{});
}

Tensor Optimizer::get_slot(const Tensor& var, const std::string& slot) const {
  const std::vector<std::string> names = slot_names();
  auto found = slots_.find({&var.graph(), var.id()});
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == slot && found != slots_.end()) return found->second[i];
  }
  throw Error(
      fmt::format("optimizer '{}' has no slot '{}' for '{}' (its slots: {}; slots exist "
                  "once the variable was in a minimize/apply_gradients call)",
                  name_, slot, var.name(), fmt::join(names, ", ")));
}

std::vector<Tensor> Optimizer::variables() const {
  std::vector<Tensor> out;
  for (const auto& [key, slots] : slots_) out.insert(out.end(), slots.begin(), slots.end());
  return out;
}

}  // namespace vkt
