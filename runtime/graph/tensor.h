#pragma once
// A handle to a tensor of a Graph.

#include <string>

#include "shape.h"

namespace vkt {

class Graph;

/// A value in a Graph: an input, a variable, a constant or an op's output.
/// Cheap to copy; valid while its Graph lives. Builders (vkt::add, vkt::matmul,
/// ...) take and return Tensors; nothing runs until an Executor runs the graph.
class Tensor {
 public:
  Tensor() = default;
  Tensor(Graph* graph, int id) : graph_(graph), id_(id) {}

  bool valid() const { return graph_ != nullptr; }
  Graph& graph() const { return *graph_; }
  int id() const { return id_; }
  const Shape& shape() const;
  DType dtype() const;
  const std::string& name() const;

  bool operator==(const Tensor& other) const = default;

 private:
  Graph* graph_ = nullptr;
  int id_ = -1;
};

}  // namespace vkt
