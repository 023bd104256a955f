#pragma once
// A model's computation on one device: inputs, variables, constants and ops.

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "../vulkan/buffer.h"
#include "../vulkan/ticket.h"
#include "initializer.h"
#include "op.h"
#include "tensor.h"

namespace vkt {

class Device;

/// External: a gradient written into the gradient arena by someone else (the
/// towers' reduced sum), neither fed nor computed.
enum class TensorKind { Input, Variable, Constant, Op, External };

/// What the graph knows of each tensor.
struct TensorInfo {
  Shape shape;
  DType dtype = DType::F32;
  TensorKind kind = TensorKind::Op;
  std::string name;
  int node = -1;         ///< index of the producing node, for TensorKind::Op
  int gradient_of = -1;  ///< variable tensor id, when autodiff made this its gradient
};

/// Where a graph computes its matrix products (the mixed-precision policy,
/// as PyTorch's autocast and Keras' mixed_float16 / mixed_bfloat16): F32 =
/// everything in f32; F16 or BF16 = matmul of f32 matrices and dense layers
/// cast their operands to that type, multiply with f32 sums, and cast the
/// product back to f32, while every other op (softmax, losses, norms,
/// reductions, the optimizers) and the variables stay f32.
enum class Precision { F32, F16, BF16 };

/// "fp32", "fp16" or "bf16", as the samples' --precision flag spells them.
const char* to_string(Precision precision);
/// Parses "fp32", "fp16" or "bf16"; anything else is a vkt::Error naming
/// `what` (the flag or field) and the three choices.
Precision parse_precision(const std::string& text, const std::string& what);
/// The half type a precision computes its products in (F32 for F32).
DType compute_dtype(Precision precision);

struct Node {
  std::unique_ptr<Op> op;
  std::vector<Tensor> inputs;
  Tensor output;
  /// The policy in effect when the node was added (the graph's, or a
  /// PrecisionScope's); autodiff builds the node's gradient under it.
  Precision precision = Precision::F32;
};

struct Variable {
  Tensor tensor;
  Initializer initializer;
  bool trainable = true;
  /// A checkpoint without it still loads; it keeps its initial value (the
  /// loss scale's state, when a run written without scaling resumes with it).
  bool optional_in_checkpoint = false;
  /// A weight kept fixed: made frozen by a FrozenScope, or stored in half.
  /// Warm start fills it, as it does a trainable one; a variable made with
  /// `trainable = false` otherwise is state (a moving average) and is not.
  bool frozen_weight = false;
};

/// Something a higher layer attaches to a graph (the towers attach their
/// replication state, which TowerOptimizer reads). Owned by the graph.
class GraphAttachment {
 public:
  virtual ~GraphAttachment() = default;
};

struct GraphOptions {
  std::uint64_t seed = 0;  ///< seeds variable initializers and dropout
  /// The row of the global batch that this graph's row 0 is (replicate_model_fn
  /// gives each tower the offset of its shard, across processes too): dropout
  /// draws each element's mask from its row of the global batch, so 1 tower, N
  /// towers and P processes drop the same elements of the same example. The
  /// initializers ignore it: every replica starts from the same values.
  std::uint32_t first_row = 0;
  /// Where matrix products run (see Precision); replicate_model_fn sets it
  /// from ReplicateOptions::precision on every tower. A half one needs 16-bit
  /// storage buffers on the device. `Graph::options().precision` is the one in
  /// effect now: a PrecisionScope changes it while it lives.
  Precision precision = Precision::F32;
  /// The least alignment, in bytes (a power of two; 0: none), of every
  /// tensor's start in the graph's arenas, beyond the device's own
  /// (tensor_alignment): replicate_model_fn gives every tower the largest of
  /// its devices', so towers on devices whose alignments differ, the master
  /// and the shares all lay their variables and gradients out alike.
  std::size_t arena_alignment = 0;
};

/// The graph of one tower: everything lives on one Device. Built once, run many
/// times by an Executor. Variables are named and unique: asking again for an
/// existing name returns the same variable, which is how towers share them.
///
///   vkt::Graph g(device);
///   vkt::Tensor x = g.input("x", {32, 784});
///   vkt::Tensor w = g.variable("w", {784, 10}, vkt::Initializer::glorot_uniform());
///   vkt::Tensor logits = vkt::matmul(x, w);
class Graph {
 public:
  explicit Graph(Device& device, GraphOptions options = {});
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  Device& device() const { return *device_; }
  const GraphOptions& options() const { return options_; }
  /// Where tensors start in this graph's arenas: a multiple of the device's
  /// tensor_alignment and of GraphOptions::arena_alignment.
  std::size_t tensor_alignment() const;

  /// A value fed by the host before each run. Names are unique.
  Tensor input(const std::string& name, const Shape& shape, DType dtype = DType::F32);
  /// The variable `name`: made on first use, returned as is afterwards. Asking
  /// for an existing name with another shape or dtype is a vkt::Error.
  ///
  /// `dtype` F16 or BF16 stores a frozen weight in half the bytes (a
  /// pretrained base kept fixed while adapters train, as PyTorch's
  /// `requires_grad_(False)` on a bf16 module): it must be `trainable =
  /// false`, its initial values are rounded to the type, and it is read
  /// through `cast` (whose widening a half product under the precision policy
  /// takes as it is). No op writes it; checkpoints store it in its type and
  /// warm start fills it. Inside a FrozenScope a variable asked for as
  /// trainable is made frozen in the scope's type instead.
  ///
  ///   vkt::Tensor base = g.variable("base/kernel", {512, 512},
  ///                                 vkt::Initializer::glorot_uniform(), false, vkt::DType::BF16);
  ///   vkt::Tensor y = vkt::matmul(x, vkt::cast(base, vkt::DType::F32));
  Tensor variable(const std::string& name, const Shape& shape,
                  const Initializer& initializer = Initializer::zeros(), bool trainable = true,
                  DType dtype = DType::F32);
  std::optional<Tensor> find_variable(const std::string& name) const;
  /// Marks `variable` Variable::optional_in_checkpoint.
  void set_optional_in_checkpoint(const Tensor& variable);
  /// A gradient of `variable` that the Executor places in its gradient arena
  /// and that something outside the graph writes before each run.
  Tensor external_gradient(const Tensor& variable);
  /// A sparse gradient of `variable` (values [rows, row shape...] f32, indices
  /// [rows] i32) whose two tensors the Executor places in its gradient arena,
  /// after the dense ones made earlier, and that something outside the graph
  /// writes before each run (the towers' rows, concatenated in tower order).
  Gradient external_sparse_gradient(const Tensor& variable, std::int64_t rows);
  std::optional<Tensor> find_input(const std::string& name) const;
  /// A constant tensor (values uploaded once). `values.size()` must equal the shape's elements.
  Tensor constant(const Shape& shape, std::span<const float> values);
  Tensor constant_i32(const Shape& shape, std::span<const std::int32_t> values);
  Tensor scalar(float value) { return constant({}, std::span<const float>(&value, 1)); }

  /// Adds an op node; used by the op builders. Checks that every input belongs
  /// to this graph.
  Tensor add_node(std::unique_ptr<Op> op, std::vector<Tensor> inputs, const Shape& shape,
                  DType dtype = DType::F32);

  const TensorInfo& info(const Tensor& t) const { return tensors_.at(t.id()); }
  TensorInfo& info_mutable(const Tensor& t) { return tensors_.at(t.id()); }
  const std::deque<Node>& nodes() const { return nodes_; }
  const std::vector<Variable>& variables() const { return variables_; }
  std::vector<Tensor> trainable_variables() const;
  const Variable& variable_of(const Tensor& t) const;
  int tensor_count() const { return static_cast<int>(tensors_.size()); }

  /// The constants' initial bytes, by tensor id (the Executor uploads them).
  const std::map<int, std::vector<std::byte>>& constant_data() const { return constants_; }

  /// Registers an op output that updates state (Op::updates_state(), e.g.
  /// assign_moving_average): every training Executor whose program computes
  /// the update's inputs runs it too, though nothing fetches it (TensorFlow's
  /// UPDATE_OPS, run with the train op).
  void add_state_update(const Tensor& update);
  const std::vector<Tensor>& state_updates() const { return state_updates_; }

  /// Completed training steps: advanced once per run of a training Executor
  /// whose program updates variables, after its last update.
  std::uint64_t global_step() const { return global_step_; }
  void set_global_step(std::uint64_t step) { global_step_ = step; }

  /// The attachment, or null; see GraphAttachment.
  GraphAttachment* attachment() const { return attachment_.get(); }
  void set_attachment(std::unique_ptr<GraphAttachment> attachment) {
    attachment_ = std::move(attachment);
  }

  /// Prefix for the names of new ops ("tower_1/"); variables are never prefixed.
  void set_name_scope(std::string scope) { scope_ = std::move(scope); }
  const std::string& name_scope() const { return scope_; }

  /// A layer's name when the caller gave none, as Keras names them: `base`
  /// the first time, then `base_1`, `base_2`, ... (skipping names whose
  /// variables exist already), so two unnamed dense layers own
  /// "dense/kernel" and "dense_1/kernel". Every graph built by the same code
  /// (each tower, evaluation) hands out the same names in the same order.
  std::string unique_layer_name(const std::string& base);

  /// The weights of the examples (f32 [rows]) that the losses of this graph
  /// use when they are given none: set by replicate_model_fn in evaluation,
  /// where a short last batch is padded (0 for a padding row), so a loss
  /// left unweighted still averages over the real examples only. Empty
  /// (the default): unweighted losses weigh every row alike.
  void set_example_weights(const Tensor& weights) { example_weights_ = weights; }
  const Tensor& example_weights() const { return example_weights_; }

  /// The variables' memory: one arena Buffer for all of them, made (and filled
  /// from the initializers) the first time an Executor needs it. Variables
  /// cannot be added after that.
  Buffer& variable_arena();
  /// The bytes at the variable arena's start that hold the frozen half
  /// variables (0 without any): they lie before every other variable, so
  /// graphs that share the model's variables share their place (a master's
  /// optimizer slots come after), and the bytes a step may change are the
  /// ones after, which is all the weights' copy-back sends.
  std::size_t frozen_bytes();
  BufferRange variable_range(const Tensor& variable);
  /// Overwrites a variable's values (a checkpoint restore, a test; rounded to
  /// a half variable's type), after the last submitted run is done.
  void assign(const Tensor& variable, std::span<const float> values);
  /// A variable's values after the last submitted run (a half variable's
  /// widened, exactly).
  std::vector<float> values(const Tensor& variable);
  /// Executors (and the towers' weight copies) record their runs here, so that
  /// host access waits for them. Thread-safe; per device queue the latest
  /// ticket counts, whichever thread records it last: a tower thread recording
  /// its step after the step's weights were copied in must not make a host read
  /// skip that copy.
  void set_last_run(const Ticket& ticket);
  /// The ticket recorded last.
  Ticket last_run() const;
  bool variables_materialized() const { return static_cast<bool>(variable_arena_); }

 private:
  friend class PrecisionScope;  // sets options_.precision while it lives
  friend class FrozenScope;     // sets frozen_dtype_ while it lives

  Tensor add_tensor(TensorInfo info);
  /// Waits for every run recorded (set_last_run), the latest of each queue.
  void wait_for_runs() const;
  void check_name_free(const std::string& name, const char* what) const;
  void check_open(const char* what) const;

  Device* device_;
  GraphOptions options_;
  // Deques: adding a tensor or node never moves the others, so references from
  // Tensor::shape() and nodes()[i] stay valid while builders add more.
  std::deque<TensorInfo> tensors_;
  std::deque<Node> nodes_;
  std::vector<Variable> variables_;
  std::map<std::string, int> variable_index_;
  std::map<std::string, int> inputs_;
  std::map<int, std::vector<std::byte>> constants_;
  std::vector<Tensor> state_updates_;
  std::string scope_;
  std::map<std::string, int> layer_names_;  // base name -> unnamed layers so far
  Tensor example_weights_;
  std::unique_ptr<GraphAttachment> attachment_;
  std::uint64_t global_step_ = 0;
  mutable std::mutex runs_mutex_;
  Ticket last_run_;
  std::vector<Ticket> pending_runs_;  // the latest ticket of each device queue recorded
  Buffer variable_arena_;
  std::size_t frozen_bytes_ = 0;
  // A FrozenScope's type: weights asked for as trainable are made frozen in it.
  std::optional<DType> frozen_dtype_;
  std::map<int, std::pair<std::size_t, std::size_t>> variable_offsets_;  // id -> offset, bytes
};

/// Where tensors start in their arenas: a multiple of 16 bytes and of the
/// device's storage and texel buffer offset alignments, so any tensor can be
/// bound as a storage buffer or read as RGBA32F texels, padding included.
std::size_t tensor_alignment(const Device& device);

/// Rounds `bytes` up to a multiple of `alignment`.
inline std::size_t align_up(std::size_t bytes, std::size_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

}  // namespace vkt
