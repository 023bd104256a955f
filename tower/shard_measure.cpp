// TowerRun's shard weights: given, measured earlier, or measured now
// (ReplicateOptions::shard_split = ShardSplit::Measured).
#include <fmt/format.h>

#include "../runtime/vulkan/error.h"
#include "tower_run.h"
#include "towers.h"

namespace vkt {

std::vector<double> TowerRun::shard_weights(int towers, Mode mode) {
  if (!options_.shard_weights.empty() || options_.shard_split == ShardSplit::Equal) {
    return options_.shard_weights;
  }
  if (options_.measure_steps == 0) {
    throw Error(
        "ReplicateOptions::measure_steps is 0; measured shards need 1 or more steps to time");
  }
  if (processes() > 1) {
    throw Error(
        "measured shards (--shard-weights measured) are for one process: across processes "
        "give the weights (--shard-weights 3,1)");
  }
  const std::vector<double>& earlier = distribution_.measured_shard_weights;
  if (static_cast<int>(earlier.size()) == towers) {
    measured_weights_ = earlier;
    return earlier;
  }
  // One tower has nothing to share; evaluation and prediction take equal shards.
  measuring_ = mode == Mode::Train && towers > 1;
  measured_ms_.assign(static_cast<std::size_t>(towers), 0.0);
  return {};
}

std::optional<std::vector<double>> TowerRun::measured_shard_weights() {
  if (!measuring_ || !step_completed_) return std::nullopt;
  // The first step builds pipelines: its times say nothing of the devices.
  if (++steps_run_ < 2) return std::nullopt;
  for (std::size_t i = 0; i < towers_->size(); ++i) {
    measured_ms_[i] += (*towers_)[i].executor->device_ms().value_or(0.0);
  }
  if (++measured_steps_ < options_.measure_steps) return std::nullopt;
  measuring_ = false;
  std::vector<double> weights;
  for (std::size_t i = 0; i < towers_->size(); ++i) {
    const double ms = measured_ms_[i] / measured_steps_;
    if (!(ms > 0)) return std::nullopt;  // a device without timestamps: equal shards stay
    weights.push_back(static_cast<double>((*towers_)[i].rows) / ms);
  }
  measured_weights_ = weights;  // the checkpoints from now on record them
  return weights;
}

}  // namespace vkt
