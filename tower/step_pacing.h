#pragma once
// One train_step queued behind the running one, and no deeper.

#include <deque>
#include <span>
#include <vector>

#include "../runtime/vulkan/device.h"

namespace vkt {

/// The one host wait of a training step: after each train_step call, the
/// last submitted ticket of every queue of every Device of the run; the call
/// two later waits for them, once per Device. Every other wait of that step
/// (a feed buffer, an update's parameters, a loss) is for work at or before
/// that point, which the Device then knows is done.
///
///   pacing.wait_two_back(devices);  // at a step's start
///   ...                             // submit the step
///   pacing.submitted(devices);      // at its end
class StepPacing {
 public:
  /// Everything the step submitted so far.
  void submitted(std::span<const Device* const> devices);
  /// Waits for what the call two back submitted; false when there is none yet.
  bool wait_two_back(std::span<const Device* const> devices);

 private:
  std::deque<std::vector<Ticket>> submitted_;  // per call
};

}  // namespace vkt
