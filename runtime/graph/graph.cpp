#include "graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "../vulkan/device.h"
#include "../vulkan/error.h"
#include "half.h"
#include "precision_scope.h"

namespace vkt {
const Shape& Tensor::shape() const {
  return graph_->info(*this).shape;
}
DType Tensor::dtype() const {
  return graph_->info(*this).dtype;
}
const std::string& Tensor::name() const {
  return graph_->info(*this).name;
}

std::size_t tensor_alignment(const Device& device) {
  const VkPhysicalDeviceLimits& limits = device.limits();
  return std::max<std::size_t>(
      {16, limits.minStorageBufferOffsetAlignment, limits.minTexelBufferOffsetAlignment});
}

Graph::Graph(Device& device, GraphOptions options) : device_(&device), options_(options) {
  check_precision_device(device, options_.precision, "GraphOptions::precision");
  const std::size_t a = options_.arena_alignment;
  if ((a & (a - 1)) != 0) {
    throw Error(fmt::format("GraphOptions::arena_alignment {} is not a power of two", a));
  }
}

std::size_t Graph::tensor_alignment() const {
  return std::max(options_.arena_alignment, vkt::tensor_alignment(*device_));
}
Graph::~Graph() = default;

Tensor Graph::add_tensor(TensorInfo info) {
  tensors_.push_back(std::move(info));
  return Tensor(this, static_cast<int>(tensors_.size()) - 1);
}

void Graph::check_name_free(const std::string& name, const char* what) const {
  if (name.empty()) throw Error(fmt::format("a {} needs a name", what));
  if (inputs_.count(name) || variable_index_.count(name)) {
    throw Error(
        fmt::format("cannot make {} '{}': the graph already has an input or variable of "
                    "that name; pick another name",
                    what, name));
  }
}

void Graph::check_open(const char* what) const {
  if (variable_arena_) {
    throw Error(
        fmt::format("cannot add {} after an Executor has run this graph: its variables are "
                    "placed once; make every variable before the first Executor",
                    what));
  }
}

Tensor Graph::input(const std::string& name, const Shape& shape, DType dtype) {
  check_name_free(name, "input");
  Tensor t = add_tensor({shape, dtype, TensorKind::Input, name});
  inputs_[name] = t.id();
  return t;
}

Tensor Graph::variable(const std::string& name, const Shape& shape, const Initializer& initializer,
                       bool trainable, DType dtype) {
  // A FrozenScope freezes the weights made in it (asked for as trainable f32).
  const bool frozen_by_scope = frozen_dtype_ && trainable && dtype == DType::F32;
  if (auto found = variable_index_.find(name); found != variable_index_.end()) {
    const Variable& existing = variables_[found->second];
    if (existing.tensor.dtype() != dtype &&
        !(frozen_by_scope && existing.tensor.dtype() == *frozen_dtype_)) {
      throw Error(
          fmt::format("variable '{}' already exists as {}; it was asked for again as {}. A name "
                      "means one variable: use another name, or the same dtype",
                      name, to_string(existing.tensor.dtype()), to_string(dtype)));
    }
    if (existing.tensor.shape() != shape) {
      throw Error(
          fmt::format("variable '{}' already exists with shape {}; it was asked for again "
                      "with shape {}. A name means one variable: use another name, or "
                      "the same shape",
                      name, existing.tensor.shape().str(), shape.str()));
    }
    return existing.tensor;
  }
  if (inputs_.count(name)) check_name_free(name, "variable");
  if (name.empty()) throw Error("a variable needs a name");
  if (initializer.kind == Initializer::Kind::Values && initializer.values_shape != shape) {
    throw Error(
        fmt::format("variable '{}' has shape {}, but Initializer::from_values was given values "
                    "of shape {}; give values of the variable's shape",
                    name, shape.str(), initializer.values_shape.str()));
  }
  if (frozen_by_scope) {
    trainable = false;
    dtype = *frozen_dtype_;
  }
  if (dtype == DType::I32) {
    throw Error(
        fmt::format("variable '{}': a variable holds f32, f16 or bf16 values, not i32; "
                    "feed integers as an input",
                    name));
  }
  if (is_half(dtype) && trainable) {
    throw Error(fmt::format(
        "variable '{}' is {} and trainable: the optimizers update f32 variables (the precision "
        "policy casts them to {} at use); make it f32, or pass trainable = false to freeze it",
        name, to_string(dtype), to_string(dtype)));
  }
  check_open(fmt::format("variable '{}'", name).c_str());
  Tensor t = add_tensor({shape, dtype, TensorKind::Variable, name});
  variable_index_[name] = static_cast<int>(variables_.size());
  variables_.push_back({.tensor = t,
                        .initializer = initializer,
                        .trainable = trainable,
                        .frozen_weight = frozen_by_scope || is_half(dtype)});
  return t;
}

void Graph::set_optional_in_checkpoint(const Tensor& variable) {
  const auto found = variable.valid() && &variable.graph() == this
                         ? variable_index_.find(variable.name())
                         : variable_index_.end();
  if (found == variable_index_.end()) {
    throw Error("set_optional_in_checkpoint: the tensor is not a variable of this graph");
  }
  variables_[found->second].optional_in_checkpoint = true;
}

std::optional<Tensor> Graph::find_variable(const std::string& name) const {
  auto found = variable_index_.find(name);
  if (found == variable_index_.end()) return std::nullopt;
  return variables_[found->second].tensor;
}

std::string Graph::unique_layer_name(const std::string& base) {
  int& count = layer_names_[base];
  for (;; ++count) {
    std::string name = count == 0 ? base : fmt::format("{}_{}", base, count);
    // A layer's variables are "<name>/..."; an explicit name may have taken it.
    const auto after = variable_index_.lower_bound(name + "/");
    if (after == variable_index_.end() || after->first.rfind(name + "/", 0) != 0) {
      ++count;
      return name;
    }
  }
}

Tensor Graph::external_gradient(const Tensor& variable) {
  const TensorInfo& v = info(variable);
  if (v.kind != TensorKind::Variable) {
    throw Error(fmt::format("external_gradient: '{}' is not a variable", v.name));
  }
  TensorInfo t{v.shape, DType::F32, TensorKind::External, "external_gradient/" + v.name};
  t.gradient_of = variable.id();
  return add_tensor(std::move(t));
}

Gradient Graph::external_sparse_gradient(const Tensor& variable, std::int64_t rows) {
  const TensorInfo& v = info(variable);
  if (v.kind != TensorKind::Variable || v.shape.rank() < 1 || rows < 1) {
    throw Error(fmt::format(
        "external_sparse_gradient: '{}' is not a variable with rows, or {} rows were asked for",
        v.name, rows));
  }
  std::vector<std::int64_t> dims = v.shape.dims();
  dims[0] = rows;
  const std::string name = v.name;
  TensorInfo values{Shape(dims), DType::F32, TensorKind::External,
                    "external_gradient/" + name + "/values"};
  values.gradient_of = variable.id();
  TensorInfo indices{Shape{rows}, DType::I32, TensorKind::External,
                     "external_gradient/" + name + "/indices"};
  indices.gradient_of = variable.id();
  const Tensor values_tensor = add_tensor(std::move(values));
  return Gradient{.values = values_tensor, .indices = add_tensor(std::move(indices))};
}

std::optional<Tensor> Graph::find_input(const std::string& name) const {
  auto found = inputs_.find(name);
  if (found == inputs_.end()) return std::nullopt;
  return Tensor(const_cast<Graph*>(this), found->second);
}

Tensor Graph::constant(const Shape& shape, std::span<const float> values) {
  if (static_cast<std::int64_t>(values.size()) != shape.elements()) {
    throw Error(fmt::format("constant of shape {} needs {} values, {} were given", shape.str(),
                            shape.elements(), values.size()));
  }
  Tensor t = add_tensor({shape, DType::F32, TensorKind::Constant,
                         fmt::format("{}const_{}", scope_, tensors_.size())});
  const auto bytes = std::as_bytes(values);
  constants_[t.id()] = std::vector<std::byte>(bytes.begin(), bytes.end());
  return t;
}

Tensor Graph::constant_i32(const Shape& shape, std::span<const std::int32_t> values) {
  if (static_cast<std::int64_t>(values.size()) != shape.elements()) {
    throw Error(fmt::format("constant of shape {} needs {} values, {} were given", shape.str(),
                            shape.elements(), values.size()));
  }
  Tensor t = add_tensor({shape, DType::I32, TensorKind::Constant,
                         fmt::format("{}const_{}", scope_, tensors_.size())});
  const auto bytes = std::as_bytes(values);
  constants_[t.id()] = std::vector<std::byte>(bytes.begin(), bytes.end());
  return t;
}

Tensor Graph::add_node(std::unique_ptr<Op> op, std::vector<Tensor> inputs, const Shape& shape,
                       DType dtype) {
  for (const Tensor& in : inputs) {
    if (!in.valid() || &in.graph() != this) {
      throw Error(
          fmt::format("op '{}': an input belongs to another graph (or is empty); ops "
                      "combine tensors of one graph, that is of one device",
                      op->type()));
    }
    if (is_half(in.dtype()) && !op->takes_half()) {
      throw Error(
          fmt::format("{}: input '{}' holds {} values and {} takes f32; cast it first: "
                      "vkt::cast(x, vkt::DType::F32)",
                      op->type(), in.name(), to_string(in.dtype()), op->type()));
    }
  }
  const std::string name = fmt::format("{}{}_{}", scope_, op->type(), nodes_.size());
  Tensor out = add_tensor({shape, dtype, TensorKind::Op, name, static_cast<int>(nodes_.size())});
  nodes_.push_back({std::move(op), std::move(inputs), out, options_.precision});
  return out;
}

void Graph::add_state_update(const Tensor& update) {
  if (!update.valid() || &update.graph() != this || info(update).node < 0 ||
      !nodes_[info(update).node].op->updates_state()) {
    throw Error(
        "add_state_update: the tensor is not the output of a state update of this graph "
        "(make it with assign_moving_average on this graph)");
  }
  state_updates_.push_back(update);
}

std::vector<Tensor> Graph::trainable_variables() const {
  std::vector<Tensor> out;
  for (const Variable& v : variables_) {
    if (v.trainable) out.push_back(v.tensor);
  }
  return out;
}

const Variable& Graph::variable_of(const Tensor& t) const {
  if (info(t).kind != TensorKind::Variable) {
    throw Error(fmt::format("'{}' is not a variable", info(t).name));
  }
  return variables_[variable_index_.at(info(t).name)];
}

Buffer& Graph::variable_arena() {
  if (variable_arena_) return variable_arena_;
  const std::size_t alignment = tensor_alignment();
  std::size_t total = 0;
  // The frozen (half) variables first: the weights' copy-back leaves them out.
  for (const bool frozen : {true, false}) {
    if (!frozen) frozen_bytes_ = total;
    for (const Variable& v : variables_) {
      if (is_half(v.tensor.dtype()) != frozen) continue;
      // A half variable's bytes are whole words, as every half tensor's are.
      const std::size_t bytes = align_up(
          static_cast<std::size_t>(v.tensor.shape().elements()) * dtype_bytes(v.tensor.dtype()), 4);
      variable_offsets_[v.tensor.id()] = {total, bytes};
      total = align_up(total + bytes, alignment);
    }
  }
  Buffer arena(*device_, std::max<std::size_t>(total, alignment));
  std::vector<std::byte> initial(arena.size());
  for (const Variable& v : variables_) {
    const std::vector<float> values = initial_values(v.initializer, v.tensor.shape(),
                                                     variable_seed(options_.seed, v.tensor.name()));
    std::byte* at = initial.data() + variable_offsets_[v.tensor.id()].first;
    if (is_half(v.tensor.dtype())) {
      const std::vector<std::uint16_t> bits = to_half_words(values, v.tensor.dtype());
      std::memcpy(at, bits.data(), bits.size() * sizeof(std::uint16_t));
    } else {
      std::memcpy(at, values.data(), values.size() * sizeof(float));
    }
  }
  arena.upload(std::span<const std::byte>(initial));
  variable_arena_ = std::move(arena);
  return variable_arena_;
}

std::size_t Graph::frozen_bytes() {
  (void)variable_arena();
  return frozen_bytes_;
}

BufferRange Graph::variable_range(const Tensor& variable) {
  Buffer& arena = variable_arena();
  auto found = variable_offsets_.find(variable.id());
  if (found == variable_offsets_.end()) {
    throw Error(fmt::format("'{}' is not a variable of this graph", info(variable).name));
  }
  return BufferRange(arena, found->second.first, found->second.second);
}

}  // namespace vkt

namespace vkt {

void Graph::set_last_run(const Ticket& ticket) {
  const std::lock_guard lock(runs_mutex_);
  last_run_ = ticket;
  if (ticket.device == nullptr) return;
  for (Ticket& t : pending_runs_) {
    if (t.device == ticket.device && t.queue == ticket.queue && t.lane == ticket.lane) {
      t.value = std::max(t.value, ticket.value);
      return;
    }
  }
  pending_runs_.push_back(ticket);
}

Ticket Graph::last_run() const {
  const std::lock_guard lock(runs_mutex_);
  return last_run_;
}

void Graph::wait_for_runs() const {
  std::vector<Ticket> runs;
  {
    const std::lock_guard lock(runs_mutex_);
    runs = pending_runs_;
  }
  for (const Ticket& t : runs) t.wait();
}

void Graph::assign(const Tensor& variable, std::span<const float> values) {
  const BufferRange r = variable_range(variable);
  const TensorInfo& i = info(variable);
  if (values.size() != static_cast<std::size_t>(i.shape.elements())) {
    throw Error(fmt::format("assign: variable '{}' has shape {} ({} values) but {} were given",
                            i.name, i.shape.str(), i.shape.elements(), values.size()));
  }
  if (!is_half(i.dtype)) {
    wait_for_runs();
    variable_arena_.upload(std::as_bytes(values), r.offset);
    return;
  }
  const std::vector<std::uint16_t> bits = to_half_words(values, i.dtype);
  wait_for_runs();
  variable_arena_.upload(std::as_bytes(std::span(bits)), r.offset);
}

std::vector<float> Graph::values(const Tensor& variable) {
  const BufferRange r = variable_range(variable);
  const TensorInfo& i = info(variable);
  wait_for_runs();
  if (!is_half(i.dtype)) {
    std::vector<float> out(r.size() / sizeof(float));
    variable_arena_.download(std::as_writable_bytes(std::span<float>(out)), r.offset);
    return out;
  }
  std::vector<std::uint16_t> bits(r.size() / sizeof(std::uint16_t));  // whole words
  variable_arena_.download(std::as_writable_bytes(std::span(bits)), r.offset);
  bits.resize(static_cast<std::size_t>(i.shape.elements()));
  return from_half(bits, i.dtype);
}

}  // namespace vkt
