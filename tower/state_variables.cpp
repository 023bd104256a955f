// TowerRun's state variables (batch norm's moving averages): tower 0's are the
// model's. They take no gradient, so the masters would never change; instead
// each step copies tower 0's values into the master (SharedLocalParameterServer:
// before the update, so the weights' copy-back carries them to every tower) or
// into the owner's share (RoundRobin, whose copy-back leaves them out, so each
// tower keeps its own). Mirrored towers keep their own; tower 0's replica is
// the one checkpoints save.
#include <set>

#include "tower_run.h"

namespace vkt {

bool TowerRun::is_state_variable(const std::string& name) const {
  const Graph& g = *towers_.front().graph;
  for (const Tensor& update : g.state_updates()) {
    const Tensor& variable = g.nodes()[static_cast<std::size_t>(g.info(update).node)].inputs[0];
    if (variable.name() == name) return true;
  }
  return false;
}

void TowerRun::build_state_copies() {
  Graph& first = *towers_.front().graph;
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

void TowerRun::copy_state(std::vector<Ticket>& arrived) {
  const Ticket written = towers_.front().graph->last_run();
  for (const auto& copy : state_in_) arrived.push_back(copy->start({&written, 1})[0]);
}

}  // namespace vkt
