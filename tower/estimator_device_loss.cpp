// Estimator::train when a tower's device is lost: stop naming it and the last
// checkpoint, or go on without it from that checkpoint (RunConfig::on_device_loss).
#include <fmt/format.h>

#include <algorithm>

#include "../runtime/vulkan/detail/log.h"
#include "../runtime/vulkan/error.h"
#include "estimator.h"
#include "estimator_detail.h"
#include "tower_device_pool.h"
#include "tower_run.h"

namespace vkt {

namespace {

std::string describe(const std::vector<TowerRun::LostTower>& lost) {
  std::vector<std::string> parts;
  for (const TowerRun::LostTower& t : lost) {
    parts.push_back(fmt::format("tower {} (device {}, {})", t.position, t.device, t.name));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

void Estimator::handle_device_loss(const DeviceLost& error) {
  const auto found = built_.find(Mode::Train);
  if (found == built_.end() || !found->second) throw error;  // lost while building
  Built& b = *found->second;
  const std::vector<TowerRun::LostTower> lost = b.run->lost_towers();
  const std::uint64_t step = b.run->global_step();
  const std::string checkpoint =
      b.restored ? fmt::format("the last checkpoint, {}, is intact", *b.restored)
                 : std::string("no checkpoint was saved yet");
  const int towers = b.run->towers();
  const bool go_on = config_.on_device_loss == DeviceLossAction::Continue &&
                     processes_ == nullptr && !lost.empty() &&
                     static_cast<int>(lost.size()) < towers;
  // Every model may hold work on the lost Devices: they go (after the
  // questions above), so that this Estimator can train, evaluate or predict
  // again on fresh ones.
  const auto drop_models = [&] {
    built_.clear();
    device_pool().forget_lost();
  };
  if (!go_on) {
    drop_models();
    const std::string why = config_.on_device_loss == DeviceLossAction::Stop ? ""
                            : processes_ != nullptr
                                ? " (across processes a lost device stops the run)"
                            : lost.empty() ? " (the lost device is no tower's)"
                                           : " (no tower is left)";
    throw DeviceLost(
        fmt::format("{}{}: training stopped after global step {}{}; {}: train again with the "
                    "same model directory to resume{}",
                    error.what(), lost.empty() ? "" : fmt::format(" [{}]", describe(lost)), step,
                    why, checkpoint,
                    config_.on_device_loss == DeviceLossAction::Stop
                        ? " (RunConfig::on_device_loss = Continue goes on without the device)"
                        : ""),
        error.device_index());
  }
  for (const TowerRun::LostTower& t : lost) lost_towers_.push_back(t.position);
  std::sort(lost_towers_.begin(), lost_towers_.end());
  detail::log().warn(
      "{}: leaving out {} after global step {}; going on with {} tower{} from {} (the global "
      "batch unchanged)",
      error.what(), describe(lost), step, towers - static_cast<int>(lost.size()),
      towers - lost.size() == 1 ? "" : "s",
      b.restored ? fmt::format("{}", *b.restored) : std::string("the initial variables"));
  drop_models();
}

}  // namespace vkt
