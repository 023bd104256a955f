#pragma once
// Saving and restoring a graph's variables (optimizer slots included) and its
// global step as a safetensors file, which PyTorch and NumPy open with the
// `safetensors` package:
//
//   vkt::save_checkpoint(graph, "model/ckpt-100.safetensors");
//   vkt::load_checkpoint(graph, "model/ckpt-100.safetensors");
//
// The "__metadata__" header object holds "format" ("vktower"), "global_step",
// "crc32" (zlib crc32 of the data section, decimal) and "variables" (a JSON
// string listing every variable's name and shape, in creation order).

#include <string>

namespace vkt {

class Graph;

/// Writes every variable of `graph` and its global step to `path`, atomically:
/// a process killed at any moment leaves the previous file at `path` loadable.
/// Waits for the graph's last run. Throws vkt::Error if the file cannot be written.
void save_checkpoint(Graph& graph, const std::string& path);

/// Restores every variable of `graph` and its global step from `path`. The
/// file's length, header, format, dtypes, shapes, offsets and checksum are
/// checked, and its variables must be exactly the graph's (same names and
/// shapes). Any problem is a vkt::Error naming the file and the first problem,
/// thrown before any variable changes.
void load_checkpoint(Graph& graph, const std::string& path);

}  // namespace vkt
