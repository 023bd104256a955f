// Which nodes a program runs, and in what order (Executor's first step).
#include <algorithm>
#include <functional>
#include <set>

#include "executor.h"

namespace vkt {

std::vector<int> program_order(const Graph& graph, const std::vector<Tensor>& fetches,
                               bool training) {
  // The nodes the fetches need, in graph order (which is topological).
  std::set<int> needed;
  std::function<void(const Tensor&)> visit = [&](const Tensor& t) {
    const int node = graph.info(t).node;
    if (node < 0 || needed.count(node)) return;
    needed.insert(node);
    for (const Tensor& in : graph.nodes()[node].inputs) visit(in);
  };
  for (const Tensor& f : fetches) visit(f);
  // A training program also runs the state updates (moving averages) of what
  // it computes: those that read any node it runs. One that computes none of
  // their inputs (an optimizer's own program) leaves them to the one that does.
  if (training) {
    const std::set<int> computed = needed;
    for (const Tensor& update : graph.state_updates()) {
      std::set<int> seen;
      bool reads_computed = false;
      std::function<void(int)> ancestors = [&](int node) {
        for (const Tensor& in : graph.nodes()[node].inputs) {
          const int producer = graph.info(in).node;
          if (producer < 0 || !seen.insert(producer).second) continue;
          if (computed.count(producer)) reads_computed = true;
          ancestors(producer);
        }
      };
      ancestors(graph.info(update).node);
      if (reads_computed) visit(update);
    }
  }
  // Updates go last, in the order they were made: every gradient of the step
  // reads the variables (and the moving statistics) as the forward pass did.
  const auto is_update = [&](int n) {
    const Op& op = *graph.nodes()[n].op;
    return op.updates_variables() || op.updates_state();
  };
  std::vector<int> order;
  for (int n : needed) {
    if (!is_update(n)) order.push_back(n);
  }
  for (int n : needed) {
    if (is_update(n)) order.push_back(n);
  }
  return order;
}

}  // namespace vkt
