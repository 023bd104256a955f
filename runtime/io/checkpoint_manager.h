#pragma once
// Numbered checkpoints in a model directory, an index naming the latest, and
// the oldest deleted beyond a limit:
//
//   vkt::CheckpointManager ckpt("model", 5);
//   if (ckpt.restore_latest(graph)) { /* resumed at graph.global_step() */ }
//   ...
//   ckpt.save(graph);  // model/ckpt-<step>.safetensors

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "atomic_file.h"

namespace vkt {

class Graph;

class CheckpointManager {
 public:
  /// Manages checkpoints in `dir` (created if missing), keeping the newest
  /// `keep_max` (at least 1; a vkt::Error otherwise).
  CheckpointManager(std::string dir, int keep_max);

  /// Saves `graph` to dir/ckpt-<global step>.safetensors, then atomically
  /// rewrites the index file dir/checkpoint, then deletes the oldest
  /// checkpoints beyond keep_max. Returns the new file's path. A save that
  /// fails (a full disk, a file size limit, an I/O error), at the checkpoint or
  /// at the index, is a FileWriteError naming the file, the call and the reason;
  /// it leaves the index and every file it names as they were (nothing is
  /// pruned) and removes the new file unless the index names it.
  std::string save(Graph& graph);
  /// The same for a model that writes its own checkpoint (a TowerRun):
  /// `write(path)` writes the file for global step `step`.
  std::string save(std::uint64_t step, const std::function<void(const std::string& path)>& write);
  /// The path of the newest checkpoint the index names, or nullopt when there
  /// is no index yet. A corrupt index is a vkt::Error.
  std::optional<std::string> latest() const;
  /// Loads latest() into `graph` (see load_checkpoint); false when there is none.
  bool restore_latest(Graph& graph);

  /// What remove_interrupted_saves() removed.
  struct Removed {
    std::size_t files = 0;
    std::uintmax_t bytes = 0;
  };
  /// Deletes the temporary files that saves killed mid-write (SIGKILL, a
  /// preempted machine) left in the directory: a checkpoint's or the index's
  /// name followed by ".tmp." and six letters or digits. Nothing else is
  /// touched. Call it only in the one process that saves to the directory,
  /// before its first save: another's save in progress would lose its file.
  ///
  ///   vkt::CheckpointManager ckpt("model", 5);
  ///   ckpt.remove_interrupted_saves();  // a restarted job's first step
  Removed remove_interrupted_saves();

  const std::string& directory() const { return dir_; }

 private:
  std::string index_path() const;
  std::vector<std::string> read_index() const;  // file names, oldest first
  // After a failed index write: removes dir/name unless the index names it,
  // and says what the directory holds now.
  std::string after_failed_index(const std::string& name, bool was_indexed,
                                 const std::string& previous) const;

  std::string dir_;
  int keep_max_;
};

}  // namespace vkt
