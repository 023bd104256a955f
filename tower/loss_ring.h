#pragma once
// The towers' losses of the last few runs, kept on the host side for a late read.

#include <cstdint>
#include <memory>
#include <vector>

#include "../runtime/vulkan/buffer.h"
#include "../runtime/vulkan/staged_range.h"
#include "../runtime/vulkan/ticket.h"

namespace vkt {

/// Each run, every tower's scaled loss (a scalar its step writes) is copied on
/// its device into slot `run % slots` of a small host-visible ring, so the
/// loss of a run is read whenever someone asks, after later runs were
/// submitted, without waiting for them. Built once: the slots and the recorded
/// copies are reused.
///
///   vkt::LossRing ring({tower0_loss, tower1_loss}, {0, 0}, 8);
///   ring.record(0, run, tower0_step);  // from each tower's thread, after its step
///   ring.record(1, run, tower1_step);
///   float loss = ring.add(run, 0.0f);  // later: tower 0's, then tower 1's
class LossRing {
 public:
  /// `losses[i]`: tower i's loss, 4 bytes of its Device, written on its
  /// compute queue `lanes[i]` (where the copies go too: the tower's next run
  /// then overwrites the loss only after they read it). Keeps `slots` runs.
  /// A source may also be several floats, for read().
  LossRing(const std::vector<BufferRange>& losses, const std::vector<std::uint32_t>& lanes,
           std::size_t slots);

  /// Tower `tower`'s run `run` has written its loss once `written` (of its
  /// Device) completes: copies it into the run's slot. Each tower from its own
  /// thread; the slot's last copy must have been read (or abandoned) by then.
  void record(std::size_t tower, std::uint64_t run, const Ticket& written);
  /// Adds run `run`'s losses to `sum` one tower at a time, in tower order (the
  /// sum of a step's micro-batches: pass the earlier runs' total). Waits for
  /// the copies; vkt::Error when the slot holds another run by now.
  float add(std::uint64_t run, float sum) const;
  /// The floats copied from source `source` for run `run` (a ring of other
  /// scalars than losses: a source may be several floats). Waits for the copy.
  std::vector<float> read(std::size_t source, std::uint64_t run) const;
  std::size_t slots() const { return slots_; }

 private:
  struct TowerSlots {
    std::unique_ptr<Buffer> ring;     // slots_ copies, host-visible (the copies point at it)
    std::vector<StagedRange> copies;  // per slot: the loss into it
    std::vector<Ticket> copied;       // per slot, its last copy
    std::vector<std::uint64_t> run;   // per slot, the run it holds (+1; 0: none)
  };
  /// Source `source`'s slot of run `run`, once its copy is done.
  const TowerSlots& slot_of(std::size_t source, std::uint64_t run) const;

  std::size_t slots_;
  std::vector<TowerSlots> towers_;
};

}  // namespace vkt
