#include "executor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <set>

#include "../vulkan/device.h"
#include "../vulkan/error.h"

namespace vkt {

namespace {
constexpr std::size_t kStepParamsBytes = 16;  // u32 step, u32 seed, u32 first row, spare

// The shaders' mix32 (lowbias32): maps 0 to 0.
std::uint32_t mix32(std::uint32_t v) {
  v ^= v >> 16;
  v *= 0x7feb352du;
  v ^= v >> 15;
  v *= 0x846ca68bu;
  v ^= v >> 16;
  return v;
}

// A 64-bit step or seed as the 32-bit word the shaders read: the low half
// with the high half hashed in, so values below 2^32 are themselves and
// larger ones still differ.
std::uint32_t fold(std::uint64_t v) {
  return static_cast<std::uint32_t>(v) ^ mix32(static_cast<std::uint32_t>(v >> 32));
}
}  // namespace

class Executor::Context final : public RecordContext {
 public:
  explicit Context(Executor& e) : e_(e) {}
  Device& device() override { return e_.graph_->device(); }
  Stream& stream() override { return e_.stream_; }
  BufferRange buffer(const Tensor& t) override { return e_.range(t); }
  BufferRange step_params() override {
    return BufferRange(e_.feed_arena_, e_.params_offset_, kStepParamsBytes);
  }
  bool training() const override { return e_.options_.training; }
  BufferRange host_params() override {
    auto found = e_.host_params_.find(e_.recording_node_);
    if (found == e_.host_params_.end()) {
      throw Error("internal: an op asked for host parameters it did not declare");
    }
    const std::size_t bytes = e_.graph_->nodes()[e_.recording_node_].op->host_params_bytes();
    return BufferRange(e_.feed_arena_, found->second, bytes);
  }

 private:
  Executor& e_;
};

class Executor::ParamsContext final : public HostParamsContext {
 public:
  explicit ParamsContext(const Executor& e) : e_(e) {}
  std::uint64_t global_step() const override { return e_.graph_->global_step(); }
  BufferRange buffer(const Tensor& t) const override { return e_.range(t); }

 private:
  const Executor& e_;
};

Executor::Executor(Graph& graph, std::vector<Tensor> fetches, ExecutorOptions options)
    : graph_(&graph),
      options_(options),
      fetches_(std::move(fetches)),
      stream_(graph.device(), QueueKind::Compute, options.compute_queue),
      step_(graph.global_step()),
      seen_global_step_(graph.global_step()) {
  if (fetches_.empty()) throw Error("an Executor needs at least one tensor to fetch");
  for (const Tensor& f : fetches_) {
    if (!f.valid() || &f.graph() != graph_) {
      throw Error("an Executor fetch belongs to another graph (or is empty)");
    }
  }
  fused_.order = program_order(*graph_, fetches_, options_.training);
  if (options_.fuse) fused_ = fused_program(*graph_, std::move(fused_.order), fetches_);
  const std::vector<int>& order = fused_.order;
  updates_ = std::any_of(order.begin(), order.end(),
                         [&](int n) { return graph_->nodes()[n].op->updates_variables(); });
  plan(order);
  record(order);
}

Executor::~Executor() {
  try {
    last_.wait();
  } catch (...) {
    // The device is lost; the buffers are released all the same.
  }
}

void Executor::plan(const std::vector<int>& order) {
  Graph& g = *graph_;
  const std::size_t alignment = g.tensor_alignment();
  // Half tensors take whole 32-bit words (two elements each), so kernels
  // that read or write them by the word stay inside their range.
  const auto bytes_of = [&](int id) {
    const TensorInfo& info = g.info(Tensor(graph_, id));
    return align_up(static_cast<std::size_t>(info.shape.elements()) * dtype_bytes(info.dtype), 4);
  };

  // Every tensor the program touches, and the last node (position) reading each.
  std::map<int, int> last_use;
  std::set<int> touched;
  for (int pos = 0; pos < static_cast<int>(order.size()); ++pos) {
    const Node& node = g.nodes()[order[pos]];
    touched.insert(node.output.id());
    for (const Tensor& in : node.inputs) {
      touched.insert(in.id());
      last_use[in.id()] = pos;
    }
  }
  for (const Tensor& f : fetches_) touched.insert(f.id());
  fused_.extend_lifetimes(g, last_use);
  // Most ops bind a tensor whole: one past the device's storage-buffer range can
  // run only as the input of an op that binds windows of it (Op::windows_input).
  const std::uint64_t limit = g.device().max_storage_buffer_range();
  for (int index : order) {
    const Node& node = g.nodes()[index];
    if (node.op->view_offset()) continue;  // records nothing
    const auto check = [&](const Tensor& t, bool windowed) {
      if (windowed || bytes_of(t.id()) <= limit) return;
      throw Error(fmt::format(
          "tensor '{}' {} holds {} bytes, more than the device's max storage buffer range "
          "of {} bytes, which {} binds whole; use smaller tensors (e.g. split the layer) or "
          "a device with a larger limit",
          t.name(), t.shape().str(), bytes_of(t.id()), limit, node.op->type()));
    };
    for (std::size_t i = 0; i < node.inputs.size(); ++i) {
      check(node.inputs[i], node.op->windows_input(i));
    }
    check(node.output, node.op->windows_output());
  }

  std::size_t feed_bytes = kStepParamsBytes, grad_bytes = 0, const_bytes = 0;
  params_offset_ = 0;
  feed_bytes = align_up(feed_bytes, alignment);
  for (int id : touched) {
    const TensorInfo& info = g.info(Tensor(graph_, id));
    const std::size_t bytes = bytes_of(id);
    switch (info.kind) {
      case TensorKind::Variable: {
        const BufferRange r = g.variable_range(Tensor(graph_, id));
        places_[id] = {Place::Arena::Variables, r.offset, bytes};
        break;
      }
      case TensorKind::Input:
        places_[id] = {Place::Arena::Feed, feed_bytes, bytes};
        feed_bytes = align_up(feed_bytes + bytes, alignment);
        break;
      case TensorKind::Constant:
        places_[id] = {Place::Arena::Constants, const_bytes, bytes};
        const_bytes = align_up(const_bytes + bytes, alignment);
        break;
      case TensorKind::External:
      case TensorKind::Op:
        if (info.gradient_of >= 0) {
          places_[id] = {Place::Arena::Gradients, grad_bytes, bytes};
          grad_bytes = align_up(grad_bytes + bytes, alignment);
        }
        break;
    }
  }
  for (int index : order) {
    const std::size_t bytes = g.nodes()[index].op->host_params_bytes();
    if (bytes == 0) continue;
    host_params_[index] = feed_bytes;
    feed_bytes = align_up(feed_bytes + bytes, alignment);
  }
  // The graph's variable arena exists even when the program reads no variable.
  (void)g.variable_arena();

  // Views share their root's memory; a root lives as long as its last view.
  std::map<int, int> root_of;
  std::function<int(int)> root = [&](int id) -> int {
    const TensorInfo& info = g.info(Tensor(graph_, id));
    if (info.kind != TensorKind::Op || info.gradient_of >= 0) return id;
    const Node& node = g.nodes()[info.node];
    if (!node.op->view_offset()) return id;
    return root(node.inputs[0].id());
  };
  const int end = static_cast<int>(order.size());
  std::set<int> pinned;
  for (const Tensor& f : fetches_) pinned.insert(root(f.id()));
  std::map<int, int> root_last;
  for (int id : touched) {
    const int r = root(id);
    root_of[id] = r;
    const int use = pinned.count(r) ? end : (last_use.count(id) ? last_use[id] : -1);
    root_last[r] = std::max(root_last.count(r) ? root_last[r] : -1, use);
  }

  // Activations: first fit over the blocks still alive at each definition.
  struct Block {
    std::size_t offset, bytes;
    int last;
  };
  std::vector<Block> live;
  std::size_t activation_bytes = 0;
  for (int pos = 0; pos < end; ++pos) {
    const Node& node = g.nodes()[order[pos]];
    const int id = node.output.id();
    if (places_.count(id) || root_of[id] != id || fused_.unwritten(order[pos])) continue;
    live.erase(
        std::remove_if(live.begin(), live.end(), [&](const Block& b) { return b.last < pos; }),
        live.end());
    std::sort(live.begin(), live.end(),
              [](const Block& a, const Block& b) { return a.offset < b.offset; });
    const std::size_t bytes = align_up(bytes_of(id), alignment);
    std::size_t offset = 0;
    for (const Block& b : live) {
      if (offset + bytes <= b.offset) break;
      offset = std::max(offset, b.offset + b.bytes);
    }
    live.push_back({offset, bytes, std::max(root_last[id], pos)});
    places_[id] = {Place::Arena::Activations, offset, bytes_of(id)};
    activation_bytes = std::max(activation_bytes, offset + bytes);
  }
  // Views: their root's place plus the view's offset.
  for (int pos = 0; pos < end; ++pos) {
    const Node& node = g.nodes()[order[pos]];
    const int id = node.output.id();
    if (places_.count(id) || fused_.unwritten(order[pos])) continue;
    const Place& parent = places_.at(node.inputs[0].id());
    places_[id] = {parent.arena, parent.offset + *node.op->view_offset(), bytes_of(id)};
  }

  Device& device = g.device();
  const auto make = [&](std::size_t bytes) { return Buffer(device, std::max(bytes, alignment)); };
  gradient_arena_ = make(grad_bytes);
  feed_arena_ = make(feed_bytes);
  constant_arena_ = make(const_bytes);
  activation_arena_ = make(activation_bytes);
  if (options_.double_buffered_feeds) {
    for (StagedRange& buffer : feed_buffers_) {
      buffer = StagedRange(
          feed_arena_, StagedRange::Direction::ToDevice,
          {.queue = QueueKind::Compute, .lane = options_.compute_queue, .even_if_mapped = true});
    }
  } else {
    feed_in_ = StagedRange(feed_arena_, StagedRange::Direction::ToDevice, {.submits = false});
  }
  for (const auto& [id, place] : places_) {
    if (g.info(Tensor(graph_, id)).kind == TensorKind::Input) ++inputs_;
  }
  std::vector<std::byte> constants(constant_arena_.size());
  for (const auto& [id, data] : g.constant_data()) {
    if (auto p = places_.find(id); p != places_.end()) {
      std::memcpy(constants.data() + p->second.offset, data.data(), data.size());
    }
  }
  constant_arena_.upload(std::span<const std::byte>(constants));
}

void Executor::record(const std::vector<int>& order) {
  // Where each ready group is complete: after the last node writing one of its
  // tensors (a view is written by its root's node).
  std::map<int, int> position;  // node index -> position in order
  for (int pos = 0; pos < static_cast<int>(order.size()); ++pos) position[order[pos]] = pos;
  std::vector<int> group_end;
  for (const std::vector<Tensor>& group : options_.ready_groups) {
    int end = -1;
    for (const Tensor& t : group) {
      check_fetched(t);
      int node = graph_->info(t).node;
      while (node >= 0 && graph_->nodes()[node].op->view_offset()) {
        node = graph_->info(graph_->nodes()[node].inputs[0]).node;
      }
      if (const auto fused = fused_.recorded_by.find(node); fused != fused_.recorded_by.end()) {
        node = fused->second;
      }
      if (node >= 0 && position.count(node)) end = std::max(end, position[node]);
    }
    group_end.push_back(end);
  }
  std::set<int> splits(group_end.begin(), group_end.end());
  std::map<int, std::size_t> segment_after;  // position -> segment it ends

  timed_ = options_.timestamps && graph_->device().info().timestamps;
  if (timed_) stream_.timestamp();
  const bool profiled = options_.profile && graph_->device().info().timestamps;
  if (profiled) stream_.profile_commands();
  if (!options_.double_buffered_feeds) feed_in_.record_into(stream_);
  std::size_t exchange_bytes = 0;
  for (int index : order) {
    const Node& node = graph_->nodes()[index];
    if (node.op->sums_across_replicas())
      exchange_bytes += 2 * align_up(range(node.output).size(), 16);
  }
  if (exchange_bytes > 0)
    exchange_host_ = Buffer(graph_->device(), exchange_bytes, BufferKind::Staging);
  Context ctx(*this);
  const int last = static_cast<int>(order.size()) - 1;
  for (int pos = 0; pos <= last; ++pos) {
    const Node& node = graph_->nodes()[order[pos]];
    if (profiled) command_node_.resize(stream_.command_count(), -1);
    if (node.op->sums_across_replicas()) {
      record_exchange(node);
    } else if (!node.op->view_offset()) {
      record_node(ctx, order[pos]);
    }
    if (profiled) command_node_.resize(stream_.command_count(), order[pos]);
    if (splits.count(pos) && pos != last) segment_after[pos] = stream_.end_segment();
  }
  recording_node_ = -1;
  if (timed_) stream_.timestamp();
  for (const int end : group_end) {
    const auto found = segment_after.find(end);
    group_segment_.push_back(found != segment_after.end() ? found->second
                             : end < 0                    ? 0
                                                          : stream_.segment_count() - 1);
  }
}

Buffer& Executor::arena(Place::Arena a) {
  return const_cast<Buffer&>(static_cast<const Executor*>(this)->arena(a));
}

const Buffer& Executor::arena(Place::Arena a) const {
  switch (a) {
    case Place::Arena::Variables:
      return graph_->variable_arena();
    case Place::Arena::Gradients:
      return gradient_arena_;
    case Place::Arena::Feed:
      return feed_arena_;
    case Place::Arena::Constants:
      return constant_arena_;
    default:
      return activation_arena_;
  }
}

BufferRange Executor::range(const Tensor& tensor) const {
  auto found = places_.find(tensor.id());
  if (found == places_.end()) {
    throw Error(
        fmt::format("tensor '{}' is not part of this Executor's program; fetch it when "
                    "making the Executor",
                    tensor.name()));
  }
  return BufferRange(arena(found->second.arena), found->second.offset, found->second.bytes);
}

std::span<std::byte> Executor::feed_host() {
  return (options_.double_buffered_feeds ? feed_buffers_[next_feed_] : feed_in_).host();
}

std::optional<double> Executor::device_ms() const {
  if (!timed_) return std::nullopt;
  return stream_.elapsed_ns(0, 1) / 1e6;
}

Ticket Executor::ready(std::size_t group) const {
  if (group >= group_segment_.size()) {
    throw Error(fmt::format("Executor::ready: group {} of {}", group, group_segment_.size()));
  }
  return stream_.segment_ticket(group_segment_[group]);
}

Ticket Executor::run(std::span<const Ticket> waits) {
  // Once every input was fed it stays fed: the per-step path skips the check.
  if (!all_fed_) {
    for (const auto& [id, place] : places_) {
      const TensorInfo& info = graph_->info(Tensor(graph_, id));
      if (info.kind == TensorKind::Input && !fed_.count(info.name)) {
        throw Error(
            fmt::format("run: input '{}' ({}) was never fed; call feed(\"{}\", values) "
                        "before run()",
                        info.name, info.shape.str(), info.name));
      }
    }
    all_fed_ = true;
  }
  if (options_.double_buffered_feeds) {
    if (fresh_ != inputs_) {
      throw Error(fmt::format(
          "run: {} of {} inputs were fed since the last run; with double-buffered feeds "
          "every input is fed before each run",
          fresh_, inputs_));
    }
    feed_copied_[next_feed_].wait();
  } else {
    last_.wait();
  }
  // A new global step (restored, or trained by another program) restarts the
  // random streams there: a resumed run draws what the uninterrupted one did.
  if (graph_->global_step() != seen_global_step_) step_ = graph_->global_step();
  const std::uint32_t params[4] = {fold(step_), fold(graph_->options().seed),
                                   graph_->options().first_row, 0};
  const std::span<std::byte> host = feed_host();
  std::memcpy(host.data() + params_offset_, params, sizeof(params));
  const ParamsContext params_context(*this);
  for (const auto& [index, offset] : host_params_) {
    const Node& node = graph_->nodes()[index];
    node.op->write_host_params(host.subspan(offset, node.op->host_params_bytes()), node.inputs,
                               params_context);
  }
  ++step_;
  if (options_.double_buffered_feeds) {
    // The step's start barrier orders it after this copy on the queue.
    feed_copied_[next_feed_] = feed_buffers_[next_feed_].submit(waits);
    next_feed_ ^= 1;
  }
  ++runs_;
  fresh_ = 0;
  last_ = exchanges_.empty() ? stream_.submit(waits) : submit_with_exchanges(waits);
  graph_->set_last_run(last_);
  if (updates_ && options_.training) graph_->set_global_step(graph_->global_step() + 1);
  seen_global_step_ = graph_->global_step();
  return last_;
}

void Executor::wait() {
  last_.wait();
}

}  // namespace vkt
