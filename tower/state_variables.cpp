// The update's state variables (batch norm's moving averages): tower 0's are the
// model's. They take no gradient, so the masters would never change; instead
// each step copies tower 0's values into the master (SharedLocalParameterServer:
// before the update, so the weights' copy-back carries them to every tower) or
// into the owner's share (RoundRobin, whose copy-back leaves them out, so each
// tower keeps its own). Mirrored towers keep their own; tower 0's replica is
// the one checkpoints save.
#include <set>

#include "towers.h"
#include "weight_update.h"

namespace vkt {

bool WeightUpdate::is_state_variable(const Graph& tower0, const std::string& name) {
  for (const Tensor& update : tower0.state_updates()) {
    const Tensor& variable =
        tower0.nodes()[static_cast<std::size_t>(tower0.info(update).node)].inputs[0];
    if (variable.name() == name) return true;
  }
  return false;
}

void WeightUpdate::build_state_copies(const Towers& towers) {
  Graph& first = *towers.front().graph;
  std::set<std::string> done;
  for (const Tensor& update : first.state_updates()) {
    const Tensor variable =
        first.nodes()[static_cast<std::size_t>(first.info(update).node)].inputs[0];
    if (!done.insert(variable.name()).second) continue;
    Graph* holder = master_.get();
    for (Share& share : shares_) {
      if (share.graph->find_variable(variable.name())) holder = share.graph.get();
    }
    if (holder == nullptr) continue;  // Mirrored
    state_in_.push_back(std::make_unique<CrossDeviceCopy>(
        first.variable_range(variable),
        holder->variable_range(*holder->find_variable(variable.name()))));
  }
}

void WeightUpdate::copy_state(const Towers& towers, std::vector<Ticket>& arrived) {
  const Ticket written = towers.front().graph->last_run();
  for (const auto& copy : state_in_) arrived.push_back(copy->start({&written, 1})[0]);
}

}  // namespace vkt
