#pragma once
// The step's gradients summed (dense) and gathered (sparse rows) over processes.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "../runtime/graph/shape.h"
#include "../runtime/mpi/process_group.h"
#include "../runtime/vulkan/buffer.h"
#include "../runtime/vulkan/staged_range.h"
#include "../runtime/vulkan/stream.h"
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
/// its sums to it, half the bytes travel between the processes, and every rank
/// widens the same rounded total (ProcessGroup's half sum). Where the buffer is
/// mapped the host rounds and widens; where it is staged the device does, each
/// chunk packed to half words before its download and widened after its upload,
/// so half the bytes cross the bus too and the host only sums.
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
  /// in) written by this process; the others' blocks are filled in.
  /// `exchange`: the type the sums travel in (F32, F16 or BF16).
  /// `chunk_bytes`: the f32 bytes of a staged chunk.
  ProcessExchange(ProcessGroup& processes, std::vector<Part> sums, std::vector<Part> blocks,
                  std::size_t chunk_bytes = std::size_t{16} << 20, DType exchange = DType::F32);

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
  /// Bytes one run() copies between the devices and the host for the sums,
  /// down and up: 0 where every part is mapped; with a half format about half
  /// the f32 figure (each chunk's words padded to whole 32-bit words).
  std::size_t staged_sum_bytes() const { return staged_sum_bytes_; }

  ProcessGroup& processes() const { return processes_; }

 private:
  /// A summed part's host side: where mapped, its own bytes in one chunk;
  /// else its chunks, each to and from staging buffer c % 2. With a half
  /// format a staged chunk is packed into device buffer c % 2 (`words`) and
  /// that comes down and goes up: `pack` and `unpack` (per chunk, recorded
  /// once) hold the packing and the download, the upload and the widening.
  struct Staged {
    std::unique_ptr<Buffer> staging[2];
    std::unique_ptr<Buffer> words[2];
    std::vector<StagedRange> down, up;  // per chunk
    std::vector<Stream> pack, unpack;   // per chunk, with half words
    std::vector<std::size_t> values;    // per chunk, its f32 values
    Ticket submit_down(std::size_t c, std::span<const Ticket> waits);
    Ticket submit_up(std::size_t c);
  };
  void build_staged(const Part& part, Staged& staged);
  void build_packed(const Part& part, Staged& staged);
  /// A gathered part's host side: this rank's block down, every block up.
  struct Gathered {
    std::unique_ptr<Buffer> staging;  // the whole part, where not mapped
    StagedRange mine, all;
  };
  Gathered build_gathered(const Part& part) const;
  void gather(Gathered& part, const std::string& what);
  /// `values` summed over the processes in place, in f32 or rounded to half_
  /// on the host.
  void allreduce(std::span<float> values, const std::string& what);
  /// Chunk `c` of `s` summed over the processes in place, on the host.
  void allreduce_chunk(Staged& s, std::size_t c, const std::string& what);

  ProcessGroup& processes_;
  std::vector<Part> sums_;
  std::vector<Part> blocks_;
  std::size_t chunk_bytes_;
  DType exchange_;
  std::optional<HalfFormat> half_;     // the span conversions of exchange_, unless F32
  std::vector<std::uint16_t> packed_;  // a half sum's values on the host, a chunk at a time
  std::vector<Staged> staged_;         // per summed part
  std::vector<Gathered> gathered_;     // per gathered part
  std::size_t staged_sum_bytes_ = 0;
};

}  // namespace vkt
