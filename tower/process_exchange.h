#pragma once
// The step's gradients summed (dense) and gathered (sparse rows) over processes.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "../runtime/mpi/process_group.h"
#include "../runtime/vulkan/buffer.h"
#include "../runtime/vulkan/staged_range.h"
#include "../runtime/vulkan/ticket.h"

namespace vkt {

/// The second level of the hierarchical exchange: once each process has summed
/// its own towers' gradients on its consolidation device, the sums are summed
/// over the processes (in rank order, so every rank holds the same bits) and
/// every process's sparse rows are gathered (in rank order), in place in the
/// consolidation device's buffers. Every rank then applies the same update.
/// Where the buffer is host-visible (lavapipe, integrated GPUs) MPI works on the
/// mapped memory itself; elsewhere chunk by chunk through two staging buffers,
/// the next chunk's download running on the device while the host exchanges
/// the current one, so a large model needs no second full-size host buffer.
/// With a half format (ReplicateOptions::exchange_dtype) each process rounds
/// its sums to it on the host, half the bytes travel between the processes,
/// and every rank widens the same rounded total (ProcessGroup's half sum).
///
///   vkt::ProcessExchange exchange(world, {{&arena, 0, dense_bytes}}, {});
///   std::vector<vkt::Ticket> done = exchange.run(summed, "step 7");
///   update.run(done);  // the arena holds the sum over every rank
class ProcessExchange {
 public:
  /// A byte range of a consolidation-device buffer.
  struct Part {
    Buffer* buffer = nullptr;
    std::size_t offset = 0;
    std::size_t bytes = 0;
  };
  /// `sums`: f32 ranges summed over the processes. `blocks`: ranges made of
  /// processes.size() equal blocks, this rank's block (rank() * bytes / size()
  /// in) written by this process; the others' blocks are filled in. `half`:
  /// the format the sums travel in (none: f32).
  ProcessExchange(ProcessGroup& processes, std::vector<Part> sums, std::vector<Part> blocks,
                  std::size_t chunk_bytes = std::size_t{16} << 20,
                  std::optional<HalfFormat> half = std::nullopt);

  /// Exchanges once `ready` (the work writing the parts, tickets of the parts'
  /// devices) completes. Collective: every rank calls it once per step; `what`
  /// names the step in errors. Returns, per summed part, the ticket (of its
  /// device) after which it holds the sum: work reading it must wait for it.
  /// The gathered parts are complete on return.
  std::vector<Ticket> run(std::span<const Ticket> ready, const std::string& what);
  /// run()'s two halves. Summed part `k` alone, once `ready` completes (tickets
  /// of any device; those of the part's count): the ticket after which it
  /// holds the sum (empty where the host wrote it). Collective: every rank sums
  /// the parts in the same order.
  Ticket sum(std::size_t k, std::span<const Ticket> ready, const std::string& what);
  /// Every gathered part, once `ready` completes; complete on return. Collective.
  void gather(std::span<const Ticket> ready, const std::string& what);
  std::size_t summed_parts() const { return sums_.size(); }
  std::size_t part_bytes(std::size_t k) const { return sums_.at(k).bytes; }

  ProcessGroup& processes() const { return processes_; }

 private:
  /// A summed part's host side: where mapped, its own bytes in one chunk;
  /// else its chunks, each to and from staging buffer c % 2.
  struct Staged {
    std::unique_ptr<Buffer> staging[2];
    std::vector<StagedRange> down, up;  // per chunk
  };
  void build_staged(const Part& part, Staged& staged) const;
  /// A gathered part's host side: this rank's block down, every block up.
  struct Gathered {
    std::unique_ptr<Buffer> staging;  // the whole part, where not mapped
    StagedRange mine, all;
  };
  Gathered build_gathered(const Part& part) const;
  void gather(Gathered& part, const std::string& what);
  /// `values` summed over the processes in place, in f32 or through half_.
  void allreduce(std::span<float> values, const std::string& what);

  ProcessGroup& processes_;
  std::vector<Part> sums_;
  std::vector<Part> blocks_;
  std::size_t chunk_bytes_;
  std::optional<HalfFormat> half_;
  std::vector<std::uint16_t> packed_;  // a half sum's values on the host, a chunk at a time
  std::vector<Staged> staged_;         // per summed part
  std::vector<Gathered> gathered_;     // per gathered part
};

}  // namespace vkt
