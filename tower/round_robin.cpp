// The RoundRobin variable mode of the update: each device of the towers holds the
// masters of every N-th variable, reduces their gradients and applies their
// updates, so the reduction and optimizer work is spread over the devices.
#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "../runtime/vulkan/error.h"
#include "../runtime/vulkan/instance.h"
#include "optimizer_calls.h"
#include "towers.h"
#include "weight_broadcast.h"
#include "weight_update.h"

namespace vkt {

void WeightUpdate::build_round_robin(Towers& towers, const OptimizerCalls& calls,
                                     const GradientBuckets& buckets,
                                     const UpdatePlacement& placement) {
  Towers::Tower& first = towers.front();
  const int n = static_cast<int>(towers.size());
  std::map<std::string, int> owner;  // variable name -> the tower whose device holds its master
  int k = 0;
  for (const Variable& v : first.graph->variables()) owner[v.tensor.name()] = k++ % n;
  const auto owner_of_gradient = [&](const Tensor& g) {
    return owner.at(
        first.graph->info(Tensor(first.graph.get(), first.graph->info(g).gradient_of)).name);
  };

  shares_.resize(static_cast<std::size_t>(n));
  for (int j = 0; j < n; ++j) {
    Share& share = shares_[static_cast<std::size_t>(j)];
    Device& device = consolidation_device(
        towers, placement, placement.devices[static_cast<std::size_t>(j)], share.instance,
        share.device, towers[static_cast<std::size_t>(j)].device);
    share.graph = std::make_unique<Graph>(device, first.graph->options());
    check_same_layout(*share.graph, *first.graph);
    for (const Variable& v : first.graph->variables()) {
      if (owner.at(v.tensor.name()) == j) {
        share.graph->variable(v.tensor.name(), v.tensor.shape(), v.initializer, v.trainable,
                              v.tensor.dtype());
      }
    }
    // This share's gradients, made in tower 0's gradient-arena order.
    std::vector<std::pair<std::size_t, std::size_t>>
        mine;  // (offset in tower 0, index in gradients)
    for (std::size_t i = 0; i < first.gradients.size(); ++i) {
      if (owner_of_gradient(first.gradients[i]) == j) {
        mine.emplace_back(first.executor->range(first.gradients[i]).offset, i);
      }
    }
    std::sort(mine.begin(), mine.end());
    std::map<std::size_t, Tensor> external;  // index in gradients -> this share's gradient
    for (const auto& [offset, i] : mine) {
      const Tensor g = first.gradients[i];
      const std::string var =
          first.graph->info(Tensor(first.graph.get(), first.graph->info(g).gradient_of)).name;
      external[i] = share.graph->external_gradient(*share.graph->find_variable(var));
    }
    // Each recorded call, restricted to this share's variables, in call order.
    std::vector<Tensor> updates;
    std::size_t index = 0;
    for (const OptimizerCalls::Call& call : calls.calls) {
      std::vector<GradVar> gvs;
      for (const GradVar& gv : call.per_tower[0]) {
        if (external.count(index)) {
          gvs.push_back({Gradient{external.at(index)}, *share.graph->find_variable(gv.var.name())});
        }
        ++index;
      }
      if (!gvs.empty()) updates.push_back(call.optimizer->apply_gradients(gvs));
    }
    if (updates.empty()) {  // its variables take no update: nothing to reduce or copy
      destinations_.emplace_back();
      continue;
    }
    share.executor = std::make_unique<Executor>(*share.graph, updates,
                                                ExecutorOptions{.double_buffered_feeds = true});

    std::vector<std::vector<GradientReducer::Segment>> segments(static_cast<std::size_t>(n));
    for (int t = 0; t < n; ++t) {
      const Towers::Tower& tower = towers[static_cast<std::size_t>(t)];
      for (const auto& [offset, i] : mine) {
        segments[static_cast<std::size_t>(t)].push_back(
            {tower.executor->range(tower.gradients[i]),
             share.executor->range(external.at(i)).offset, buckets.of_gradient[i]});
      }
    }
    destinations_.push_back({BufferRange(share.executor->gradient_arena()), std::move(segments)});
    // Each new value is read once and sent to every tower.
    for (const Variable& v : first.graph->variables()) {
      const std::optional<Tensor> master = share.graph->find_variable(v.tensor.name());
      // A state variable stays each tower's own (state_variables.cpp); a
      // frozen half one never changes.
      if (!master || is_state_variable(*first.graph, v.tensor.name()) ||
          is_half(v.tensor.dtype())) {
        continue;
      }
      std::vector<BufferRange> replicas;
      for (Towers::Tower& t : towers) {
        replicas.push_back(t.graph->variable_range(*t.graph->find_variable(v.tensor.name())));
      }
      // A trainable weight may travel in half, the master keeping f32.
      const BufferRange from = share.graph->variable_range(*master);
      std::vector<WeightBroadcast::Range> trainable;
      if (v.trainable) trainable.push_back({0, from.size()});
      share.weights_back.push_back(std::make_unique<WeightBroadcast>(
          from, replicas, trainable, placement.options->weight_copy_dtype));
    }
  }
}

std::chrono::steady_clock::time_point WeightUpdate::apply_round_robin(
    const std::vector<Ticket>& summed, Towers& towers) {
  // Each share's update runs after its sums on its device's queue.
  std::vector<Ticket> applied(shares_.size());
  for (std::size_t j = 0; j < shares_.size(); ++j) {
    Share& share = shares_[j];
    if (!share.executor) continue;
    applied[j] = share.executor->run(summed[j].device ? std::span<const Ticket>(&summed[j], 1)
                                                      : std::span<const Ticket>());
  }
  const auto updated = std::chrono::steady_clock::now();
  // Tower 0's moving averages into their owners' masters, for checkpoints.
  std::vector<Ticket> state;
  copy_state(towers, state);
  for (const Ticket& t : state) t.wait();
  std::uint64_t step = 0;
  for (std::size_t j = 0; j < shares_.size(); ++j) {
    Share& share = shares_[j];
    if (!share.executor) continue;
    for (const auto& copy : share.weights_back) {
      const std::span<const Ticket> arrived = copy->start({&applied[j], 1});
      for (std::size_t i = 0; i < towers.size(); ++i) towers.weights_arrive(i, arrived[i]);
    }
    step = share.graph->global_step();
  }
  for (Towers::Tower& t : towers) t.graph->set_global_step(step);
  return updated;
}

}  // namespace vkt
