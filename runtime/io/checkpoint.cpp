#include "checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "../graph/graph.h"
#include "../vulkan/detail/log.h"
#include "../vulkan/error.h"
#include "atomic_file.h"
#include "checkpoint_file.h"

namespace vkt {
namespace {

using detail::CheckpointEntry;
using detail::CheckpointFile;

// Names missing from the file, extra in it, or with another shape, listed.
void check_matches_graph(const std::string& path, std::span<Graph* const> graphs,
                         const std::map<std::string, CheckpointEntry>& entries,
                         CheckpointMatch match) {
  std::vector<std::string> missing, extra, reshaped;
  for (const Graph* graph : graphs) {
    for (const Variable& v : graph->variables()) {
      const auto it = entries.find(v.tensor.name());
      if (it == entries.end()) {
        if (!v.optional_in_checkpoint) missing.push_back(v.tensor.name());
      } else if (it->second.shape != v.tensor.shape()) {
        reshaped.push_back(fmt::format("'{}' is {} in it, {} in the model", v.tensor.name(),
                                       it->second.shape.str(), v.tensor.shape().str()));
      }
    }
  }
  const auto in_a_graph = [&](const std::string& name) {
    return std::any_of(graphs.begin(), graphs.end(),
                       [&](const Graph* g) { return g->find_variable(name).has_value(); });
  };
  for (const auto& [name, e] : entries) {
    if (match == CheckpointMatch::Exact && !e.optional && !in_a_graph(name)) extra.push_back(name);
  }
  if (missing.empty() && extra.empty() && reshaped.empty()) return;
  // Every difference at debug level; the error itself stays one short line.
  std::vector<std::string> all = reshaped;
  for (const std::string& name : missing)
    all.push_back(fmt::format("the model's '{}' is not in it", name));
  for (const std::string& name : extra)
    all.push_back(fmt::format("its '{}' is not in the model", name));
  detail::log().debug("checkpoint '{}' does not match the model: {}", path, fmt::join(all, "; "));
  const std::string more =
      all.size() == 1
          ? ""
          : fmt::format(", and {} more difference{}", all.size() - 1, all.size() == 2 ? "" : "s");
  throw Error(fmt::format(
      "checkpoint '{}' was written by another model ({}{}); give another RunConfig.model_dir, or "
      "build the model that wrote it",
      path, all.front(), more));
}

}  // namespace

void save_checkpoint(Graph& graph, const std::string& path) {
  Graph* const graphs[] = {&graph};
  save_checkpoint(graphs, graph.global_step(), path);
}

void save_checkpoint(std::span<Graph* const> graphs, std::uint64_t global_step,
                     const std::string& path) {
  save_checkpoint(graphs, global_step, path, {});
}

void save_checkpoint(std::span<Graph* const> graphs, std::uint64_t global_step,
                     const std::string& path, std::span<const double> shard_weights) {
  std::vector<detail::CheckpointTensor> tensors;
  for (Graph* graph : graphs) {
    for (const Variable& v : graph->variables()) {
      tensors.push_back({v.tensor.name(), v.tensor.shape(), graph->values(v.tensor),
                         v.tensor.dtype(), v.optional_in_checkpoint});
    }
  }
  write_file_atomically(path, detail::encode_checkpoint(path, tensors, global_step, shard_weights));
}

std::uint64_t checkpoint_global_step(const std::string& path) {
  return CheckpointFile::read_header(path).global_step();
}

std::vector<double> checkpoint_shard_weights(const std::string& path) {
  return CheckpointFile::read_header(path).shard_weights();
}

void load_checkpoint(Graph& graph, const std::string& path, CheckpointMatch match) {
  Graph* const graphs[] = {&graph};
  load_checkpoint(graphs, path, match);
}

void load_checkpoint(std::span<Graph* const> graphs, const std::string& path,
                     CheckpointMatch match) {
  const CheckpointFile file = CheckpointFile::read(path);
  check_matches_graph(path, graphs, file.entries(), match);
  // Everything is checked: from here on nothing can refuse the file.
  for (Graph* graph : graphs) {
    for (const Variable& v : graph->variables()) {
      if (!file.entries().count(v.tensor.name())) {
        detail::log().info("checkpoint '{}' has no '{}': it keeps its initial value", path,
                           v.tensor.name());
        continue;
      }
      graph->assign(v.tensor, file.values(v.tensor.name()));
    }
    graph->set_global_step(file.global_step());
  }
}

namespace {

std::map<std::string, HostTensor> tensors_of(const CheckpointFile& file) {
  std::map<std::string, HostTensor> out;
  for (const auto& [name, entry] : file.entries()) {
    out[name] = HostTensor::floats(entry.shape, file.values(name));
  }
  return out;
}

}  // namespace

std::map<std::string, HostTensor> read_checkpoint(const std::string& path) {
  return tensors_of(CheckpointFile::read(path));
}

std::map<std::string, HostTensor> read_safetensors(const std::string& path) {
  return tensors_of(CheckpointFile::read(path, true, true));
}

}  // namespace vkt
