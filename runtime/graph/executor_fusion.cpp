// Which ops of a program the Executor records together (ExecutorOptions::fuse):
// an op that absorbs an earlier one (a loss's gradient its loss), and chains
// of elementwise ops, and how the Executor records them. Each dispatch saved is about half a submit
// round trip on lavapipe, more than a small kernel's work.
#include <algorithm>
#include <set>

#include "../vulkan/error.h"
#include "executor.h"
#include "ops/elementwise_chain.h"

namespace vkt {
namespace {

/// Moves each op that absorbs an earlier one right after it, when every input
/// it reads is computed by then, and groups the two.
void fuse_absorbing(const Graph& g, FusedProgram& p) {
  for (std::size_t b = 1; b < p.order.size(); ++b) {
    const Node& later = g.nodes()[p.order[b]];
    if (later.inputs.empty() || p.recorded_by.count(p.order[b])) continue;
    // Candidates read the same first input (a loss and its gradient, the labels).
    for (std::size_t a = 0; a < b; ++a) {
      const int earlier_index = p.order[a];
      const Node& earlier = g.nodes()[earlier_index];
      if (earlier.inputs.empty() || earlier.inputs[0] != later.inputs[0] ||
          p.recorded_by.count(earlier_index) ||
          !later.op->absorbs(earlier, later.inputs, later.output)) {
        continue;
      }
      const auto computed_by_then = [&](const Tensor& t) {
        const int producer = g.info(t).node;
        const auto at = std::find(p.order.begin(), p.order.end(), producer);
        return producer < 0 || at - p.order.begin() <= static_cast<std::ptrdiff_t>(a);
      };
      if (!std::all_of(later.inputs.begin(), later.inputs.end(), computed_by_then)) continue;
      const int later_index = p.order[b];
      p.order.erase(p.order.begin() + static_cast<std::ptrdiff_t>(b));
      p.order.insert(p.order.begin() + static_cast<std::ptrdiff_t>(a) + 1, later_index);
      p.groups[later_index] = {.nodes = {earlier_index, later_index}, .chain = false};
      p.recorded_by[earlier_index] = p.recorded_by[later_index] = later_index;
      break;
    }
  }
}

/// Whether `chain`, `last` its newest node, fits one kernel: its limits, no
/// link's value read back as an input, and every stored link read by others
/// only after `last`, where the kernel runs.
bool chain_fits(const Graph& g, const FusedProgram::Group& chain, int last,
                std::map<int, std::set<int>>& readers, const std::map<int, int>& position) {
  std::vector<const Node*> nodes;
  for (int n : chain.nodes) nodes.push_back(&g.nodes()[n]);
  const std::vector<Tensor> inputs = ops_detail::chain_inputs(nodes);
  if (nodes.size() > ops_detail::kChainSteps || inputs.size() > ops_detail::kChainInputs ||
      chain.stored.size() > ops_detail::kChainStores || !ops_detail::chain_indexable(nodes)) {
    return false;
  }
  const std::set<int> members(chain.nodes.begin(), chain.nodes.end());
  for (const Tensor& t : inputs) {
    if (members.count(g.info(t).node)) return false;  // an unwritten or stored link
  }
  for (std::size_t k : chain.stored) {
    for (int reader : readers[nodes[k]->output.id()]) {
      if (!members.count(reader) && position.at(reader) <= position.at(last)) return false;
    }
  }
  return true;
}

/// Grows elementwise chains node by node in program order: a node joins the
/// chain (or the single op) computing one of its inputs when the chain's
/// kernel can still take it, and every link that others read is read after it.
void fuse_chains(const Graph& g, const std::vector<Tensor>& fetches, FusedProgram& p) {
  std::map<int, std::set<int>> readers;  // tensor id -> nodes of the program reading it
  std::map<int, int> position;           // node -> position in the order
  for (std::size_t pos = 0; pos < p.order.size(); ++pos) {
    position[p.order[pos]] = static_cast<int>(pos);
    for (const Tensor& in : g.nodes()[p.order[pos]].inputs) readers[in.id()].insert(p.order[pos]);
  }
  std::set<int> fetched;
  for (const Tensor& f : fetches) fetched.insert(f.id());
  const auto elementwise = [&](int index) {
    return index >= 0 && g.nodes()[index].op->elementwise_step().has_value();
  };
  for (int index : p.order) {
    const Node& node = g.nodes()[index];
    if (!elementwise(index) || p.recorded_by.count(index)) continue;
    for (const Tensor& in : node.inputs) {
      const TensorInfo& info = g.info(in);
      const int producer = info.node;
      if (!elementwise(producer) || info.gradient_of >= 0 || info.shape != node.output.shape()) {
        continue;
      }
      // The producer's chain so far (itself alone if it is in none).
      const auto group = p.groups.find(producer);
      if (p.recorded_by.count(producer) && (group == p.groups.end() || !group->second.chain)) {
        continue;  // absorbed elsewhere, or inside a chain already
      }
      FusedProgram::Group chain = group != p.groups.end()
                                      ? group->second
                                      : FusedProgram::Group{.nodes = {producer}, .chain = true};
      if (readers[in.id()].size() > 1 || fetched.count(in.id())) {
        chain.stored.push_back(chain.nodes.size() - 1);
      }
      chain.nodes.push_back(index);
      if (!chain_fits(g, chain, index, readers, position)) continue;
      if (group != p.groups.end()) p.groups.erase(group);
      for (int n : chain.nodes) p.recorded_by[n] = index;
      p.groups[index] = std::move(chain);
      break;
    }
  }
}

}  // namespace

FusedProgram fused_program(const Graph& graph, std::vector<int> order,
                           const std::vector<Tensor>& fetches) {
  FusedProgram p;
  p.order = std::move(order);
  fuse_absorbing(graph, p);
  fuse_chains(graph, fetches, p);
  return p;
}

void Op::record_fused(RecordContext&, const Node&, std::span<const Tensor>, const Tensor&) const {
  throw Error("internal: " + type() + " absorbs an op but records no fused kernel");
}

void FusedProgram::extend_lifetimes(const Graph& graph, std::map<int, int>& last_use) const {
  for (int pos = 0; pos < static_cast<int>(order.size()); ++pos) {
    const auto group = groups.find(order[pos]);
    if (group == groups.end()) continue;
    for (int member : group->second.nodes) {
      const Node& node = graph.nodes()[member];
      for (const Tensor& t : node.inputs) last_use[t.id()] = std::max(last_use[t.id()], pos);
      if (!group->second.chain) {
        last_use[node.output.id()] = std::max(last_use[node.output.id()], pos);
      }
    }
  }
}

void Executor::record_node(RecordContext& ctx, int index) {
  const Node& node = graph_->nodes()[index];
  recording_node_ = index;
  const auto recorder = fused_.recorded_by.find(index);
  if (recorder == fused_.recorded_by.end()) {
    node.op->record(ctx, node.inputs, node.output);
    return;
  }
  if (recorder->second != index) return;  // its group's last node records it
  const FusedProgram::Group& group = fused_.groups.at(index);
  if (!group.chain) {
    node.op->record_fused(ctx, graph_->nodes()[group.nodes.front()], node.inputs, node.output);
    return;
  }
  std::vector<const Node*> chain;
  for (int member : group.nodes) chain.push_back(&graph_->nodes()[member]);
  ops_detail::record_elementwise_chain(ctx, chain, group.stored);
}

}  // namespace vkt
