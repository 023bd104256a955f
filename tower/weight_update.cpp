#include "weight_update.h"

#include <fmt/format.h>

#include "../runtime/vulkan/error.h"
#include "../runtime/vulkan/instance.h"
#include "optimizer_calls.h"
#include "tower_device_pool.h"
#include "towers.h"

namespace vkt {

WeightUpdate::WeightUpdate(Towers& towers, const OptimizerCalls& calls,
                           const GradientBuckets& buckets, const UpdatePlacement& placement,
                           int processes, int rank, int accumulate_steps,
                           std::vector<std::vector<Tensor>> mirrored_updates)
    : processes_(processes), rank_(rank), accumulate_(accumulate_steps) {
  switch (placement.options->variable_mode) {
    case VariableMode::Mirrored:
      build_mirrored(towers, buckets, placement, mirrored_updates);
      break;
    case VariableMode::RoundRobin:
      build_round_robin(towers, calls, buckets, placement);
      break;
    case VariableMode::SharedLocalParameterServer:
      build_master(towers, calls, buckets, placement);
      break;
  }
  build_state_copies(towers);
}

// The members go in reverse order: the copies, then the programs, then the
// graphs, then the Devices they lie on.
WeightUpdate::~WeightUpdate() = default;

Device& WeightUpdate::consolidation_device(Towers& towers, const UpdatePlacement& placement,
                                           std::uint32_t index, std::unique_ptr<Instance>& instance,
                                           std::unique_ptr<Device>& device, const Device* tower) {
  if (placement.options->consolidation_placement != ConsolidationPlacement::SeparateDevice) {
    if (tower != nullptr) return *const_cast<Device*>(tower);
    for (Towers::Tower& t : towers) {
      if (t.device->info().index == index) return *t.device;
    }
  }
  instance = TowerDevicePool::own_instance(*placement.root, index);
  device = std::make_unique<Device>(*instance, index, placement.device_options);
  return *device;
}

void WeightUpdate::check_same_layout(const Graph& graph, const Graph& tower0) {
  if (graph.tensor_alignment() == tower0.tensor_alignment()) return;
  const DeviceInfo& info = graph.device().info();
  throw Error(
      fmt::format("the consolidation device {} ({}) aligns buffers to {} bytes, the towers to {}; "
                  "consolidate on a tower's device (ConsolidationPlacement::OnTowerDevice, or a "
                  "consolidation_device that is a tower's)",
                  info.index, info.name, graph.tensor_alignment(), tower0.tensor_alignment()));
}

std::chrono::steady_clock::time_point WeightUpdate::apply(const GradientExchange::Summed& summed,
                                                          std::span<const Ticket> towers_done,
                                                          Towers& towers) {
  if (!shares_.empty()) return apply_round_robin(summed.sums, towers);
  if (!master_) {  // Mirrored: the sum to every tower, each updates its own replica
    const std::span<const Ticket> arrived = broadcast_->start({summed.sums.data(), 1});
    for (std::size_t i = 0; i < towers.size(); ++i) {
      // Tower i's next step runs after its update on its own queue.
      const Ticket updated = tower_updates_[i]->run(arrived.subspan(i, 1));
      if (i == 0) scale_updated_ = updated;
    }
    return std::chrono::steady_clock::now();
  }
  // The update runs after the sums and the sparse rows on the consolidation
  // device's queue, and after tower 0's moving averages arrive.
  std::vector<Ticket> ready = summed.sparse;
  if (summed.sums.front().device != nullptr) ready.push_back(summed.sums.front());
  copy_state(towers, ready);
  const Ticket applied = master_executor_->run(ready);
  scale_updated_ = applied;
  const auto updated = std::chrono::steady_clock::now();
  // A model with state variables (batch norm's moving averages) has its
  // towers' state updates queued behind their gradients: the new weights
  // (and averages) land after them.
  const std::span<const Ticket> arrived = weights_out_->start(
      {&applied, 1}, state_in_.empty() ? std::span<const Ticket>() : towers_done);
  for (std::size_t i = 0; i < towers.size(); ++i) {
    towers.weights_arrive(i, arrived[i]);
    towers[i].graph->set_global_step(master_->global_step());
  }
  return updated;
}

std::optional<WeightUpdate::ScaleState> WeightUpdate::loss_scale_state() const {
  Executor* update = master_executor_         ? master_executor_.get()
                     : tower_updates_.empty() ? nullptr
                                              : tower_updates_.front().get();
  if (update == nullptr) return std::nullopt;
  const Graph& graph = update->graph();
  const std::optional<Tensor> scale = graph.find_variable("loss_scale/scale");
  const std::optional<Tensor> skipped = graph.find_variable("loss_scale/skipped_steps");
  if (!scale || !skipped) return std::nullopt;
  const BufferRange first = update->range(*scale), last = update->range(*skipped);
  // The variables are laid out in the order made (scale, good steps, skipped),
  // each aligned: one copy takes the three.
  if (first.buffer != last.buffer || last.offset <= first.offset ||
      last.offset - first.offset > 64) {
    return std::nullopt;
  }
  return ScaleState{BufferRange(*first.buffer, first.offset, last.offset + 4 - first.offset),
                    scale_lane_};
}

std::vector<Graph*> WeightUpdate::share_graphs() const {
  std::vector<Graph*> graphs;
  for (const Share& share : shares_) graphs.push_back(share.graph.get());
  return graphs;
}

void WeightUpdate::send_weights() {
  if (master_) weights_out_->run();
  for (Share& share : shares_) {
    for (const auto& copy : share.weights_back) copy->run();
  }
}

std::vector<const Device*> WeightUpdate::own_devices() const {
  std::vector<const Device*> devices;
  if (master_device_) devices.push_back(master_device_.get());
  for (const Share& share : shares_) {
    if (share.device) devices.push_back(share.device.get());
  }
  return devices;
}

std::uint64_t WeightUpdate::host_waits() const {
  std::uint64_t waits = broadcast_ ? broadcast_->host_waits() : 0;
  if (weights_out_) waits += weights_out_->host_waits();
  for (const Share& share : shares_) {
    for (const auto& copy : share.weights_back) waits += copy->host_waits();
  }
  return waits;
}

}  // namespace vkt
