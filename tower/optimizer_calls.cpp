#include "optimizer_calls.h"

#include <fmt/format.h>

#include <string>

#include "../runtime/graph/graph.h"
#include "../runtime/vulkan/error.h"

namespace vkt {
namespace {

std::vector<std::string> variable_names(const std::vector<GradVar>& grads) {
  std::vector<std::string> names;
  for (const GradVar& gv : grads) names.push_back(gv.var.name());
  return names;
}

}  // namespace

Tensor TowerReplication::record_call(std::uint64_t wrapper, const Optimizer& optimizer,
                                     std::vector<GradVar> grads) {
  const int k = next_++;
  if (tower_ == 0) {
    std::unique_ptr<Optimizer>& copy = calls_.optimizers[wrapper];
    if (!copy) copy = optimizer.clone();
    if (!copy) throw Error(fmt::format("optimizer '{}': clone() returned null", optimizer.name()));
    OptimizerCalls::Call call;
    call.optimizer = copy.get();
    call.per_tower.resize(towers_);
    calls_.calls.push_back(std::move(call));
  } else {
    if (k >= static_cast<int>(calls_.calls.size())) {
      throw Error(
          fmt::format("tower {} made optimizer call {} ('{}') but tower 0 made only {}; "
                      "every tower must make the same optimizer calls in the same order",
                      tower_, k + 1, optimizer.name(), calls_.calls.size()));
    }
    const OptimizerCalls::Call& first = calls_.calls[k];
    const auto theirs = variable_names(first.per_tower[0]);
    const auto ours = variable_names(grads);
    if (first.optimizer->name() != optimizer.name() || theirs != ours) {
      throw Error(
          fmt::format("tower {}'s optimizer call {} ('{}' on {}) differs from tower 0's "
                      "('{}' on {}); every tower must make the same optimizer calls in "
                      "the same order",
                      tower_, k + 1, optimizer.name(), fmt::join(ours, ", "),
                      first.optimizer->name(), fmt::join(theirs, ", ")));
    }
  }
  calls_.calls[k].per_tower[tower_] = std::move(grads);
  return graph_.scalar(0.0f);  // the tower's train op: the update happens on the towers' master
}

}  // namespace vkt
