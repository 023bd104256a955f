#include "optimizer.h"

#include <fmt/format.h>

#include <set>

#include "../runtime/graph/autodiff.h"
#include "../runtime/graph/graph.h"
#include "../runtime/vulkan/error.h"
#include "apply_op.h"
#include "replication.h"
#include "sparse_row_links.h"

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
  Tensor no_check;
  return apply(grads_and_vars, Tensor{}, no_check);
}

Tensor Optimizer::apply(const std::vector<GradVar>& grads_and_vars, const Tensor& scale,
                        Tensor& check) {
  if (grads_and_vars.empty()) {
    throw Error(
        fmt::format("optimizer '{}': no gradients to apply (the loss reaches none of the "
                    "variables, or the list is empty)",
                    name_));
  }
  Graph& g = grads_and_vars.front().var.graph();
  if (const Replication* r = replication_of(g); r != nullptr) {
    throw Error(
        fmt::format("optimizer '{}' is used in a model function that runs on {} tower(s) "
                    "whose gradients are combined (several towers or processes, or "
                    "accumulation) without TowerOptimizer: wrap it, e.g. vkt::TowerOptimizer "
                    "opt(std::make_unique<vkt::SGD>(0.1f)), so that the gradients are "
                    "summed and applied once",
                    name_, r->towers()));
  }
  const std::vector<std::string> names = slot_names();
  std::set<int> seen;
  for (const GradVar& gv : grads_and_vars) {
    if (!gv.var.valid() || &gv.var.graph() != &g || g.info(gv.var).kind != TensorKind::Variable) {
      throw Error(
          fmt::format("optimizer '{}': every entry must pair a gradient with a variable of "
                      "one graph",
                      name_));
    }
    if (is_half(gv.var.dtype())) {
      throw Error(fmt::format(
          "optimizer '{}': variable '{}' is {}, a frozen weight that no optimizer writes; leave "
          "it out of var_list, or make it an f32 trainable variable",
          name_, gv.var.name(), to_string(gv.var.dtype())));
    }
    if (!seen.insert(gv.var.id()).second) {
      throw Error(fmt::format("optimizer '{}': variable '{}' appears twice in one call", name_,
                              gv.var.name()));
    }
    if (gv.grad.sparse()) {
      const Shape& var = gv.var.shape();
      const Shape& values = gv.grad.values.shape();
      const std::int64_t k = gv.grad.indices.valid() ? gv.grad.indices.shape().elements() : -1;
      if (var.rank() < 1 || values.rank() < 1 || values[0] != k ||
          values.elements() != k * (var.elements() / var[0]) ||
          gv.grad.indices.dtype() != DType::I32) {
        throw Error(fmt::format(
            "optimizer '{}': the sparse gradient of '{}' does not match it (values {} must "
            "be [k, row...] for i32 indices [k] and rows of {})",
            name_, gv.var.name(), values.str(), var.str()));
      }
      continue;
    }
    if (!gv.grad.valid() || gv.grad.dense.shape() != gv.var.shape()) {
      throw Error(fmt::format("optimizer '{}': the gradient of '{}' must have its shape {}", name_,
                              gv.var.name(), gv.var.shape().str()));
    }
  }

  // Gradients must sit in the gradient arena, in memory of their own; one handed
  // in by the user that is not an autodiff gradient (or is a view) gets a copy.
  const auto owned = [&g](const Tensor& t, const Tensor& var) {
    const TensorInfo& info = g.info(t);
    const bool view = info.kind == TensorKind::Op && g.nodes()[info.node].op->view_offset();
    return info.gradient_of < 0 || view ? detail::gradient_copy(t, var) : t;
  };
  // Dense gradients update their variables in one ApplyOp; sparse ones (an
  // embedding's rows) lazily in one SparseApplyOp, only at the rows they name.
  std::vector<std::size_t> dense, sparse;
  std::vector<Tensor> grads, values, indices;  // by entry; values/indices sparse only
  std::vector<Tensor> norm_of;                 // what clipping by global norm measures
  for (std::size_t i = 0; i < grads_and_vars.size(); ++i) {
    const GradVar& gv = grads_and_vars[i];
    (gv.grad.sparse() ? sparse : dense).push_back(i);
    grads.push_back(gv.grad.sparse() ? Tensor{} : owned(gv.grad.dense, gv.var));
    values.push_back(gv.grad.sparse() ? owned(gv.grad.values, gv.var) : Tensor{});
    indices.push_back(gv.grad.sparse() ? owned(gv.grad.indices, gv.var) : Tensor{});
    norm_of.push_back(gv.grad.sparse() ? values.back() : grads.back());
  }

  // The global norm takes the values rows as given (duplicates not summed, the
  // rows of out-of-range indices included), as tf.clip_by_global_norm does
  // with IndexedSlices.
  const bool norm = clipping_.global_norm > 0;
  const Tensor norm_tensor = norm ? detail::global_norm(norm_of) : Tensor{};
  // The loss scaler's check covers what the norm does: every value the update reads.
  const bool scaled = scale.valid();
  if (scaled) check = detail::finite_check(norm_of, scale, check);
  std::vector<std::vector<Tensor>> slots;
  for (const GradVar& gv : grads_and_vars) slots.push_back(slots_for(g, gv.var));

  Tensor train;
  if (!dense.empty()) {
    std::vector<Tensor> inputs;
    if (norm) inputs.push_back(norm_tensor);
    if (scaled) inputs.push_back(check);
    for (std::size_t i : dense) {
      inputs.push_back(grads_and_vars[i].var);
      inputs.push_back(grads[i]);
      inputs.insert(inputs.end(), slots[i].begin(), slots[i].end());
    }
    train = g.add_node(std::make_unique<detail::ApplyOp>(shader(), step_values(), clipping_,
                                                         dense.size(), names.size(), norm, scaled),
                       inputs, Shape{});
  }
  if (!sparse.empty()) {
    std::vector<Tensor> inputs;
    if (norm) inputs.push_back(norm_tensor);
    if (scaled) inputs.push_back(check);
    if (train.valid()) inputs.push_back(train);  // after the dense update; one train op
    for (std::size_t i : sparse) {
      inputs.push_back(grads_and_vars[i].var);
      inputs.push_back(values[i]);
      inputs.push_back(indices[i]);
      inputs.push_back(detail::sparse_row_links(indices[i], grads_and_vars[i].var.shape()[0]));
      inputs.insert(inputs.end(), slots[i].begin(), slots[i].end());
    }
    train = g.add_node(
        std::make_unique<detail::SparseApplyOp>(shader(), step_values(), clipping_, sparse.size(),
                                                names.size(), norm, scaled, train.valid()),
        inputs, Shape{});
  }
  return train;
}

std::vector<Tensor> Optimizer::slots_for(Graph& g, const Tensor& var) {
  std::vector<Tensor>& slots = slots_[{&g, var.id()}];
  if (!slots.empty()) return slots;
  for (const std::string& slot : slot_names()) {
    const std::string slot_name = fmt::format("{}/{}/{}", var.name(), name_, slot);
    if (g.find_variable(slot_name)) {
      throw Error(
          fmt::format("optimizer '{}': slot '{}' already exists; two optimizers of the "
                      "same name update '{}': give them different names",
                      name_, slot_name, var.name()));
    }
    slots.push_back(
        g.variable(slot_name, var.shape(), Initializer::constant(slot_initial_value(slot)), false));
  }
  return slots;
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
