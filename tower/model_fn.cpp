#include "model_fn.h"

#include <fmt/format.h>

#include "../runtime/vulkan/error.h"

namespace vkt {

const Tensor& TensorDict::at(const std::string& key) const {
  const auto it = find(key);
  if (it == end()) missing(key);
  return it->second;
}

Tensor& TensorDict::at(const std::string& key) {
  const auto it = find(key);
  if (it == end()) missing(key);
  return it->second;
}

void TensorDict::missing(const std::string& key) const {
  std::vector<std::string> keys;
  for (const auto& [k, v] : *this)
    keys.push_back(k.empty() ? "'' (the unnamed one)" : "'" + k + "'");
  throw Error(
      empty()
          ? fmt::format("the model asks its {} for '{}', and there are none (the input gives "
                        "no {})",
                        kind_, key, kind_)
          : fmt::format("the model asks its {} for '{}'; the input gives {}: check the spelling "
                        "of the key in the model and in the input",
                        kind_, key, fmt::join(keys, ", ")));
}

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
