#pragma once
// The master's new weights to every tower (SharedLocalParameterServer), in
// f32 or with the trainable weights in half.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "../runtime/graph/shape.h"
#include "../runtime/vulkan/buffer.h"
#include "../runtime/vulkan/cross_device_copy.h"
#include "../runtime/vulkan/stream.h"
#include "../runtime/vulkan/ticket.h"

namespace vkt {

/// Copies the master's variable arena (`master`, the towers' stretch of it)
/// to every tower's (`towers`, same size). In f32 that is one broadcast
/// (CrossDeviceCopy). With a half `dtype` (ReplicateOptions::weight_copy_dtype)
/// the master's Device packs the `trainable` ranges (byte offsets and sizes in
/// the arena) to f16 or bf16 and the rest as it is (moving averages; the loss
/// scale, whose 2^16 f16 cannot hold) into one buffer; one broadcast carries
/// it, and each tower's Device widens it back into its arena. The master
/// keeps f32: only the towers' copies are rounded.
///
///   vkt::WeightBroadcast out(master_arena, tower_arenas, trainable, vkt::DType::BF16);
///   std::span<const vkt::Ticket> arrived = out.start({update_ticket});
class WeightBroadcast {
 public:
  struct Range {
    std::size_t offset, bytes;
  };
  WeightBroadcast(BufferRange master, std::vector<BufferRange> towers,
                  const std::vector<Range>& trainable, DType dtype);
  ~WeightBroadcast();

  /// As CrossDeviceCopy::start: per tower, the ticket (of its Device) after
  /// which its arena holds the weights; `tower_after` (empty or per tower)
  /// must be done before a tower's arena is overwritten.
  std::span<const Ticket> start(std::span<const Ticket> master_ready = {},
                                std::span<const Ticket> tower_after = {});
  /// start() and wait.
  void run();
  std::uint64_t host_waits() const;

 private:
  std::unique_ptr<CrossDeviceCopy> f32_;  // f32: the whole arena
  // Half: the packing on the master, the packed bytes to every tower's
  // staging, and per tower the widening (and the f32 pieces' copies) into
  // its arena.
  std::optional<Buffer> packed_;
  std::optional<Stream> pack_;
  std::unique_ptr<CrossDeviceCopy> half_;
  std::vector<Buffer> arrived_;  // per tower, the packed bytes on its Device
  std::vector<Stream> unpack_;   // per tower
  std::vector<Ticket> tickets_;  // per tower, of the last start()
};

}  // namespace vkt
