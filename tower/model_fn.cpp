#include "model_fn.h"

#include "../runtime/vulkan/error.h"

namespace vkt {

ModelContext::ModelContext(Instance& instance, std::map<std::string, InputSpec> features,
                           std::map<std::string, InputSpec> labels, GraphOptions graph_options)
    : instance_(&instance),
      features_(std::move(features)),
      labels_(std::move(labels)),
      graph_options_(graph_options) {}

ModelContext::ModelContext(Graph& graph, int tower, int towers)
    : graph_(&graph), tower_(tower), towers_(towers), graph_options_(graph.options()) {}

Graph& ModelContext::graph() const {
  if (graph_ == nullptr) {
    throw Error(
        "this is a root model context, which has no graph: run the model function through "
        "replicate_model_fn (devices {0} for one device), which gives each tower its graph");
  }
  return *graph_;
}

const Tensor& ModelContext::example_weights() const {
  if (!example_weights_.valid()) {
    throw Error(
        "example_weights() is given to a tower's model context (replicate_model_fn makes "
        "them); this context has none");
  }
  return example_weights_;
}

Instance& ModelContext::instance() const {
  if (instance_ == nullptr) throw Error("a tower model context has no instance of its own");
  return *instance_;
}

}  // namespace vkt
