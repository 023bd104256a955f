#pragma once
// A training run's losses: each run's in a ring, each completed step's until taken.

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "../runtime/vulkan/buffer.h"
#include "../runtime/vulkan/ticket.h"
#include "loss_ring.h"

namespace vkt {

/// A completed training step's loss.
struct StepLoss {
  std::uint64_t step = 0;  ///< the global step it completed
  float loss = 0;
};

/// A loss scaler's state after a step: the scale the next step multiplies its
/// loss by, and how many steps were skipped so far.
struct LossScaleState {
  std::uint64_t step = 0;  ///< the global step it follows
  float scale = 0;
  float skipped_steps = 0;
};

/// The bookkeeping behind TowerRun::loss() and take_losses(): every run (a
/// micro-batch on every tower) copies the towers' losses into a LossRing; a
/// step's loss is the sum of its runs' in run, then tower order (what reading
/// the towers' loss tensors after each run summed); the last kKept completed
/// steps wait to be taken.
///
///   vkt::StepLosses losses(tower_losses, accumulate_steps);
///   losses.record(tower, ticket);             // each tower, after its run
///   losses.run_done();                        // then once
///   losses.step_done(global_step);            // the step's last run
///   for (vkt::StepLoss l : losses.take(2)) ...
class StepLosses {
 public:
  static constexpr std::size_t kKept = 3;
  /// `tower_losses[i]`: tower i's scaled loss (4 bytes of its Device), written
  /// on its compute queue `lanes[i]`.
  StepLosses(const std::vector<BufferRange>& tower_losses, const std::vector<std::uint32_t>& lanes,
             int runs_per_step);

  /// Also keeps each step's loss-scale state: `state` holds the scaler's
  /// "loss_scale/scale", "loss_scale/good_steps" and
  /// "loss_scale/skipped_steps" in a row, as the update leaves them, on
  /// compute queue `lane` of its Device, and step_done() gets the update's ticket.
  void watch_loss_scale(const BufferRange& state, std::uint32_t lane);
  /// Tower `tower`'s current run wrote its loss once `written` completes.
  void record(std::size_t tower, const Ticket& written);
  /// Every tower recorded the current run; `first` when it starts a step.
  void run_done(bool first);
  /// The runs since the step's first complete global step `step`; under
  /// watch_loss_scale(), its update writes the scale's state once `updated`
  /// completes.
  void step_done(std::uint64_t step, const Ticket& updated = {});
  /// The current step's runs so far, summed (waits for them).
  float current() const;
  /// The completed steps' losses, oldest first, all but the newest `leave`.
  std::vector<StepLoss> take(std::size_t leave);
  /// The loss-scale state after the newest step take() returned, when
  /// watched: read with the losses, it waits for nothing they did not.
  const std::optional<LossScaleState>& taken_loss_scale() const { return taken_scale_; }
  /// A restore: the next run starts a step, nothing is pending.
  void reset();

 private:
  float sum(std::uint64_t first, std::uint64_t end) const;

  int runs_per_step_;
  LossRing ring_;
  std::uint64_t runs_ = 0;        // runs done
  std::uint64_t step_first_ = 0;  // the current step's first run
  struct Pending {
    std::uint64_t step, first_run, index;  // index: the step's count, its scale slot
  };
  std::deque<Pending> pending_;
  std::uint64_t steps_ = 0;           // steps done
  std::unique_ptr<LossRing> scales_;  // per step, the scaler's state after it
  std::optional<LossScaleState> taken_scale_;
};

}  // namespace vkt
