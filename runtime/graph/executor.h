#pragma once
// Plans a graph's memory once, records its step once, replays it.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "../vulkan/buffer.h"
#include "../vulkan/staged_range.h"
#include "../vulkan/stream.h"
#include "../vulkan/ticket.h"
#include "graph.h"

namespace vkt {

struct ExecutorOptions {
  /// Training program (dropout active) or evaluation/prediction.
  bool training = true;
  /// Groups of fetched tensors handed over as soon as they are written: the
  /// recorded step ends a segment after the last command that writes a group's
  /// tensors, and ready(k) is that segment's ticket, so group k can be copied
  /// while the rest of the step runs (the towers' gradient buckets).
  std::vector<std::vector<Tensor>> ready_groups{};
  /// Time every run on the device (timestamp queries; ignored where the device
  /// has none): device_ms().
  bool timestamps = false;
  /// Time every command of every run on the device (a timestamp query after
  /// each; ignored where the device has none): profile(). Costs a query write
  /// per command, so off by default; the computed values are the same bits.
  bool profile = false;
  /// Two host buffers take the feeds in turn, each copied into the feed arena
  /// by the device as the first work of its run: feeding the next run's inputs
  /// waits only for the copy two runs back, never for the running step, so the
  /// next batch uploads while this one computes. Every input must then be fed
  /// before each run.
  bool double_buffered_feeds = false;
  /// The device's compute queue the program runs on (below
  /// Device::compute_queues()): towers sharing one Device each take their own,
  /// so their steps may run side by side.
  std::uint32_t compute_queue = 0;
  /// Record fused kernels where the program allows (the same values, fewer
  /// dispatches): an op with an earlier one it absorbs (a small loss and its
  /// gradient, a dense layer's dpre and bias gradient), and chains of
  /// elementwise ops (one kernel per chain; fused_program()). Off, every op
  /// records its own kernels (for comparisons).
  bool fuse = true;
  /// The sum over the model's replicas at each cross_replica_sum of the
  /// program (synchronized batch norm), called by run() on its own thread, in
  /// program order: `point` counts them from 0 in each run, `local` is this
  /// graph's value, `sum` takes the sum. run() returns only after the last one.
  /// Empty: this graph is the only replica, and the sum is its own value.
  std::function<void(std::size_t point, std::span<const float> local, std::span<float> sum)>
      replica_sum{};
};

/// The nodes that computing `fetches` needs, in graph order, then the updates
/// (optimizer steps; in a training program also the state updates of what it
/// computes) in the order they were made: an Executor's program.
std::vector<int> program_order(const Graph& graph, const std::vector<Tensor>& fetches,
                               bool training);

/// How an Executor records a program when it fuses: `order` (program_order()'s,
/// with each op that absorbs an earlier one moved right after it) and the
/// fused groups, each recorded at its last node's position by one call; the
/// other nodes of a group record nothing.
struct FusedProgram {
  /// A fused group's nodes in program order; the last one records the group.
  struct Group {
    std::vector<int> nodes;
    /// An elementwise chain (record_elementwise_chain) rather than an op that
    /// absorbs the one before it (Op::absorbs).
    bool chain = false;
    /// A chain's links before the last that other ops read (indices into
    /// `nodes`): the chain's kernel writes them too.
    std::vector<std::size_t> stored{};
  };
  std::vector<int> order;
  std::map<int, Group> groups;     ///< by the node that records the group
  std::map<int, int> recorded_by;  ///< every grouped node -> the node recording its group

  /// Raises `last_use` (tensor id -> position in `order` of its last reader)
  /// to each group's recording position for what its nodes read, and for an
  /// absorbed op's output too (written there).
  void extend_lifetimes(const Graph& graph, std::map<int, int>& last_use) const;

  /// True for a link of a chain, before its last, that nothing else reads: its
  /// output is never written (it needs no memory).
  bool unwritten(int node) const {
    const auto r = recorded_by.find(node);
    if (r == recorded_by.end() || r->second == node) return false;
    const Group& group = groups.at(r->second);
    if (!group.chain) return false;
    for (std::size_t k : group.stored) {
      if (group.nodes[k] == node) return false;
    }
    return true;
  }
};

/// Finds what `order` can fuse. A chain is elementwise ops (Op::elementwise_step)
/// each reading the one before it, whose intermediate results have the final
/// output's shape and are no gradients; at most kChainSteps ops over at most
/// kChainInputs other tensors. Links that are fetched or that other ops read
/// (after the chain runs) are stored by the chain's kernel, at most kChainStores.
FusedProgram fused_program(const Graph& graph, std::vector<int> order,
                           const std::vector<Tensor>& fetches);

/// Runs the part of a Graph that `fetches` need. At construction it places every
/// tensor (variables in the graph's variable arena, gradients in one gradient
/// arena, inputs and the per-step parameters in a feed arena, constants in a
/// constant arena, activations in an arena whose space is reused once a tensor
/// is dead) and records the whole step into one Stream. Each run() writes the
/// step parameters and submits that stream again: nothing is allocated or
/// re-recorded after construction.
///
///   vkt::Executor step(g, {loss, grad_w});
///   step.feed("x", batch);
///   step.run();
///   float l = step.read(loss)[0];
class Executor {
 public:
  Executor(Graph& graph, std::vector<Tensor> fetches, ExecutorOptions options = {});
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  /// True when the fetches depend on input `name` (so it must be fed).
  bool takes_input(const std::string& name) const;
  /// Copies host values into input `name` for the next runs. Waits for the last
  /// run first (it may still read the old values). Size and type must match.
  void feed(const std::string& name, std::span<const float> values);
  void feed(const std::string& name, std::span<const std::int32_t> values);

  /// Submits the recorded step, after `waits` (tickets of this graph's Device,
  /// e.g. the upload of new weights); every input must have been fed once.
  Ticket run(std::span<const Ticket> waits = {});
  /// Milliseconds the device spent on the last run, from its first command to
  /// its last (waits for it); empty unless ExecutorOptions::timestamps and the
  /// device has timestamp queries.
  std::optional<double> device_ms() const;
  /// One command of the step, timed in the last run (ExecutorOptions::profile).
  struct CommandProfile {
    std::string kernel;  ///< the kernel's name, "copy" or "fill"
    std::string op;      ///< the op that recorded it (Op::type()); "feed" for the feeds' copy
    std::string tensor;  ///< that op's output tensor (empty for the feeds' copy)
    /// Device milliseconds from the end of the command before it to its own end
    /// (a barrier it waited behind included).
    double ms = 0;
  };
  /// Every command of the last run, in recording order, with its device time;
  /// waits for the run. Empty unless ExecutorOptions::profile and the device
  /// has timestamp queries.
  std::vector<CommandProfile> profile() const;
  /// The ticket, in the last run, after which ready group `k` is written.
  Ticket ready(std::size_t group) const;
  /// Waits for the last run.
  void wait();

  /// The values of a fetched tensor (or a variable) after the last run; waits for it.
  std::vector<float> read(const Tensor& tensor);
  std::vector<std::int32_t> read_i32(const Tensor& tensor);

  /// Where a tensor of this program lives (for optimizers and the towers).
  BufferRange range(const Tensor& tensor) const;
  Buffer& gradient_arena() { return gradient_arena_; }
  /// Bytes of the activation arena: the most the step's intermediate tensors
  /// hold at once (a tensor's space is reused once it is dead).
  std::size_t activation_bytes() const { return activation_arena_.size(); }
  Stream& stream() { return stream_; }
  Graph& graph() const { return *graph_; }
  /// The step the next run draws its random numbers for (dropout masks):
  /// every random stream is a function of (graph seed, this step, row, op),
  /// so a run is a pure function of the variables and the step. It starts at
  /// the graph's global step, follows it whenever it changes (a restored
  /// checkpoint, a training step), and advances by one each run in between (a
  /// program that updates nothing draws new masks each run all the same).
  std::uint64_t step() const { return step_; }
  /// Sets the step the next run draws for; TowerRun sets every tower's to the
  /// global step before each step.
  void set_step(std::uint64_t step) { step_ = step; }
  /// The cross_replica_sum points of the program (each a host hand-over per run).
  std::size_t replica_sums() const { return exchanges_.size(); }
  /// Commands (dispatches, copies, fills) in the recorded step; of these the
  /// dispatches are stream().dispatch_count().
  std::size_t dispatch_count() const { return stream_.command_count(); }

 private:
  struct Place {
    enum class Arena { Variables, Gradients, Feed, Constants, Activations } arena;
    std::size_t offset = 0;
    std::size_t bytes = 0;
  };
  class Context;
  class ParamsContext;

  /// A cross_replica_sum: its input goes to the host at the end of `segment`,
  /// the sum comes back at the start of the next one.
  struct Exchange {
    std::size_t segment = 0;
    StagedRange local;         // the input, to the host
    StagedRange sum;           // the sum, from the host into the output
    std::size_t host_end = 0;  // in exchange_host_, past both
  };
  void plan(const std::vector<int>& order);
  void record_node(RecordContext& ctx, int index);
  void record_exchange(const Node& node);
  Ticket submit_with_exchanges(std::span<const Ticket> waits);
  void record(const std::vector<int>& order);
  Buffer& arena(Place::Arena a);
  const Buffer& arena(Place::Arena a) const;
  std::span<std::byte> feed_host();
  /// The graph's input `name`; vkt::Error when there is none.
  Tensor input_named(const std::string& name) const;
  /// Copies `count` values of `dtype`, as `bytes` (half values padded to whole
  /// words), into `input`'s place in the feed arena, checked first.
  void feed_bytes(const Tensor& input, std::span<const std::byte> bytes, DType dtype,
                  std::size_t count);
  void check_fetched(const Tensor& t) const;

  Graph* graph_;
  ExecutorOptions options_;
  std::vector<Tensor> fetches_;
  std::map<int, Place> places_;               // tensor id -> place
  std::map<std::string, std::uint64_t> fed_;  // input -> runs_ when it was last fed
  std::uint64_t runs_ = 0;
  bool all_fed_ = false;
  Buffer gradient_arena_;
  Buffer feed_arena_;
  // The feeds' host side, copied into the feed arena at each run's start
  // where it is not mapped.
  StagedRange feed_in_;
  // Double-buffered feeds: the two host buffers and their copies into the
  // feed arena, the copies' last tickets, the one the next run takes, and the
  // inputs fed for it.
  StagedRange feed_buffers_[2];
  Ticket feed_copied_[2];
  int next_feed_ = 0;
  std::size_t inputs_ = 0;
  std::size_t fresh_ = 0;  // inputs fed since the last run
  std::vector<Exchange> exchanges_;
  Buffer exchange_host_;  // staging: every exchange's local value and sum, each 16-aligned
  Buffer constant_arena_;
  Buffer activation_arena_;
  Stream stream_;
  Ticket last_;
  std::uint64_t step_ = 0;
  std::uint64_t seen_global_step_ = 0;  // the graph's global step at the last run
  std::size_t params_offset_ = 0;
  std::map<int, std::size_t> host_params_;  // node index -> offset in the feed arena
  int recording_node_ = -1;
  std::vector<std::size_t> group_segment_;  // ready group -> segment of the stream
  bool timed_ = false;
  std::vector<int> command_node_;  // profiled: command -> node index (-1: the feeds' copy)
  FusedProgram fused_;
  bool updates_ = false;  // the program updates variables: runs advance the global step
};

}  // namespace vkt
