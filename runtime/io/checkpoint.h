#pragma once
// Saving and restoring a graph's variables (optimizer slots included) and its
// global step as a safetensors file, which PyTorch and NumPy open with the
// `safetensors` package:
//
//   vkt::save_checkpoint(graph, "model/ckpt-100.safetensors");
//   vkt::load_checkpoint(graph, "model/ckpt-100.safetensors");
//
// The "__metadata__" header object holds "format" ("vktower-2"), "global_step",
// "crc32" (zlib crc32 of the data section, decimal), "header_crc32" (of the
// length field and the header) and "variables" (a JSON string listing every
// variable's name and shape in data order): see checkpoint_file.h. Any single
// changed byte of a file is refused.

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "host_tensor.h"

namespace vkt {

class Graph;

/// Writes every variable of `graph` and its global step to `path`, atomically:
/// a process killed at any moment leaves the previous file at `path` loadable.
/// Waits for the graph's last run. Throws vkt::Error if the file cannot be written.
void save_checkpoint(Graph& graph, const std::string& path);

/// Which of a checkpoint's variables a graph must have.
enum class CheckpointMatch {
  /// Exactly the graph's variables (resuming training: slots included).
  Exact,
  /// Every variable of the graph; the file may hold more (an evaluation or
  /// prediction graph has no optimizer slots).
  GraphSubset,
};

/// Restores every variable of `graph` and its global step from `path`. The
/// file's length, header, format, dtypes, shapes, offsets and checksum are
/// checked, and its variables must match the graph's as `match` says (same
/// names and shapes). Any problem is a vkt::Error naming the file and the first
/// problem, thrown before any variable changes.
void load_checkpoint(Graph& graph, const std::string& path,
                     CheckpointMatch match = CheckpointMatch::Exact);

/// One checkpoint of the variables of several graphs (a model whose variables
/// are spread over devices, as TowerRun's RoundRobin mode spreads them), saved
/// with `global_step`. Names must be unique across the graphs.
void save_checkpoint(std::span<Graph* const> graphs, std::uint64_t global_step,
                     const std::string& path);
/// The same, recording the towers' measured shard weights in the header
/// (checkpoint_shard_weights reads them back; none: `shard_weights` empty).
void save_checkpoint(std::span<Graph* const> graphs, std::uint64_t global_step,
                     const std::string& path, std::span<const double> shard_weights);
/// Loads such a checkpoint: every graph's variables, as `match` says, and
/// every graph's global step; all checks before anything changes.
void load_checkpoint(std::span<Graph* const> graphs, const std::string& path,
                     CheckpointMatch match = CheckpointMatch::Exact);

/// Every tensor of a checkpoint by name, checked as load_checkpoint checks the
/// file: a model's values without building the model (Estimator::variable_value).
std::map<std::string, HostTensor> read_checkpoint(const std::string& path);

/// Every tensor of any safetensors file of F32 tensors: a vktower checkpoint is
/// checked as read_checkpoint checks it; another program's file (e.g. PyTorch's
/// safetensors save_file) has its header checked (dtype F32, rank 0 to 6,
/// offsets contiguous and covering the data) and carries no checksum. For warm
/// starts from weights trained elsewhere.
std::map<std::string, HostTensor> read_safetensors(const std::string& path);

/// The global step a checkpoint was written at, from its header alone (the
/// data is checked when it is loaded). vkt::Error when the header is unreadable.
std::uint64_t checkpoint_global_step(const std::string& path);

/// The measured shard weights a checkpoint records (save_checkpoint with
/// shard weights), from its header alone; empty when it records none.
std::vector<double> checkpoint_shard_weights(const std::string& path);

}  // namespace vkt
