#include "step_losses.h"

#include "../runtime/vulkan/error.h"

namespace vkt {

StepLosses::StepLosses(const std::vector<BufferRange>& tower_losses,
                       const std::vector<std::uint32_t>& lanes, int runs_per_step)
    : runs_per_step_(runs_per_step),
      // The steps kept, the one running and the one being submitted.
      ring_(tower_losses, lanes, (kKept + 2) * static_cast<std::size_t>(runs_per_step)) {}

void StepLosses::watch_loss_scale(const BufferRange& state, std::uint32_t lane) {
  scales_ = std::make_unique<LossRing>(std::vector<BufferRange>{state},
                                       std::vector<std::uint32_t>{lane}, kKept + 2);
}

void StepLosses::record(std::size_t tower, const Ticket& written) {
  ring_.record(tower, runs_, written);
}

void StepLosses::run_done(bool first) {
  if (first) step_first_ = runs_;
  ++runs_;
}

void StepLosses::step_done(std::uint64_t step, const Ticket& updated) {
  if (pending_.size() == kKept) pending_.pop_front();  // never taken
  if (scales_) {
    if (updated.device == nullptr) throw Error("internal: a loss-scaled step without its update");
    scales_->record(0, steps_, updated);
  }
  pending_.push_back({step, step_first_, steps_++});
}

float StepLosses::current() const {
  return sum(step_first_, runs_);
}

std::vector<StepLoss> StepLosses::take(std::size_t leave) {
  std::vector<StepLoss> taken;
  while (pending_.size() > leave) {
    const Pending p = pending_.front();
    pending_.pop_front();
    taken.push_back(
        {p.step, sum(p.first_run, p.first_run + static_cast<std::uint64_t>(runs_per_step_))});
    if (scales_) {
      // Scale, good steps, skipped steps, as the step's update left them.
      // Taken two steps late, the pacing has waited for that update already.
      const std::vector<float> state = scales_->read(0, p.index);
      taken_scale_ = LossScaleState{p.step, state.front(), state.back()};
    }
  }
  return taken;
}

void StepLosses::reset() {
  step_first_ = runs_;
  pending_.clear();
  taken_scale_.reset();
}

float StepLosses::sum(std::uint64_t first, std::uint64_t end) const {
  float total = 0;
  for (std::uint64_t run = first; run < end; ++run) total = ring_.add(run, total);
  return total;
}

}  // namespace vkt
