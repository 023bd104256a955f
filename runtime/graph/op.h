#pragma once
// The interface every op implements: record its kernels, build its gradient.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "../vulkan/buffer.h"
#include "tensor.h"

namespace vkt {

class Device;
class Stream;
struct Node;

/// What an op gets from the Executor when it records its forward computation.
class RecordContext {
 public:
  virtual ~RecordContext() = default;
  virtual Device& device() = 0;
  virtual Stream& stream() = 0;
  /// The memory of a tensor (input, output, or any tensor the op names).
  virtual BufferRange buffer(const Tensor& tensor) = 0;
  /// A small buffer the host rewrites before each run: u32 step, u32 seed.
  virtual BufferRange step_params() = 0;
  /// True in a training program (dropout drops), false in evaluation.
  virtual bool training() const = 0;
  /// This op's block of host-written parameters (Op::host_params_bytes() bytes).
  virtual BufferRange host_params() = 0;
};

/// What an op sees when the Executor asks it to write its host parameters,
/// just before each run.
class HostParamsContext {
 public:
  virtual ~HostParamsContext() = default;
  /// Completed training steps of the graph (the global step before this run).
  virtual std::uint64_t global_step() const = 0;
  /// Where a tensor of the program lives (offsets for segment tables).
  virtual BufferRange buffer(const Tensor& tensor) const = 0;
};

/// A gradient: dense, or sparse rows (`values` [k, ...] added at rows `indices`
/// [k] of the variable), as an embedding lookup produces.
struct Gradient {
  Tensor dense{};
  Tensor values{};
  Tensor indices{};

  bool sparse() const { return values.valid(); }
  bool valid() const { return dense.valid() || values.valid(); }
};

/// An elementwise op as one step of a fused chain (ExecutorOptions::fuse): its
/// code in shaders/elementwise.glsl (unary ops 0-31, binary ops 32 + their
/// code, a unary op's gradient 64 + its code) and its parameter (leaky_relu's
/// slope, pow's exponent...).
struct ElementwiseStep {
  std::uint32_t code = 0;
  float alpha = 0.0f;
};

/// One operation with one output. Each op kind lives in its own small file
/// under runtime/graph/ops/, with its builder function and its gradient.
class Op {
 public:
  virtual ~Op() = default;
  /// The kind, e.g. "add" or "matmul", used in names and messages.
  virtual std::string type() const = 0;
  /// Records the forward computation of `output` from `inputs`.
  virtual void record(RecordContext& ctx, std::span<const Tensor> inputs,
                      const Tensor& output) const = 0;
  /// Builds, as new ops, the gradient of the loss with respect to each input
  /// given `dy`, the gradient with respect to the output. An invalid Gradient
  /// means "no gradient flows to this input" (labels, indices, masks).
  virtual std::vector<Gradient> gradient(std::span<const Tensor> inputs, const Tensor& output,
                                         const Tensor& dy) const = 0;
  /// For ops whose output is a window on their first input's memory (reshape,
  /// row slices): the byte offset of the window. They record nothing.
  virtual std::optional<std::size_t> view_offset() const { return std::nullopt; }
  /// Whether the op reads f16 and bf16 inputs (cast, reshape, matmul). The
  /// graph refuses a half input to any other op, naming the op and the cast
  /// that fixes it, so no kernel ever reads half words as f32.
  virtual bool takes_half() const { return false; }

  /// Ops that update variables (optimizer steps) run after every other op of
  /// the step, in the order they were made, so that all gradients see the
  /// variables as the forward pass did.
  virtual bool updates_variables() const { return false; }
  /// Ops that update state which is no model weight (batch norm's moving
  /// averages): a training program runs them with the variable updates, after
  /// every other op, but they are no training step (the global step does not
  /// advance for them) and take no gradient. Graph::add_state_update() lists them.
  virtual bool updates_state() const { return false; }
  /// The sum over the model's replicas (cross_replica_sum): the Executor
  /// records no kernel for it but hands its input to the host between two
  /// segments of the step and copies the sum back (ExecutorOptions::replica_sum).
  virtual bool sums_across_replicas() const { return false; }

  /// Whether record() binds input `i` as windows of at most the device's
  /// storage-buffer range (several dispatches), so that it may be larger than
  /// that range; most ops bind each tensor whole, and the Executor refuses a
  /// tensor past the range that one of them binds.
  virtual bool windows_input(std::size_t /*i*/) const { return false; }
  /// The same for the output (a copy command, which has no such limit).
  virtual bool windows_output() const { return false; }

  /// Fusion (ExecutorOptions::fuse). An elementwise op (one or two f32 inputs
  /// broadcast to its output, or a cast) describes itself here, so that the
  /// Executor can record a chain of them as one kernel.
  virtual std::optional<ElementwiseStep> elementwise_step() const { return std::nullopt; }
  /// True when record_fused() computes `earlier`'s output in this op's kernel,
  /// from inputs that this op reads too (a loss and its gradient). The Executor
  /// then runs this op right after `earlier` and records the two with one call.
  virtual bool absorbs(const Node& /*earlier*/, std::span<const Tensor> /*inputs*/,
                       const Tensor& /*output*/) const {
    return false;
  }
  /// Records `output` and the output of `earlier` (an op absorbs() accepted).
  virtual void record_fused(RecordContext& /*ctx*/, const Node& /*earlier*/,
                            std::span<const Tensor> /*inputs*/, const Tensor& /*output*/) const;

  /// Size of the parameter block the host rewrites before every run (learning
  /// rate at this step, bias corrections, ...): values that change per step
  /// without re-recording. 0 for most ops.
  virtual std::size_t host_params_bytes() const { return 0; }
  virtual void write_host_params(std::span<std::byte> /*out*/, std::span<const Tensor> /*inputs*/,
                                 const HostParamsContext& /*ctx*/) const {}
};

}  // namespace vkt
