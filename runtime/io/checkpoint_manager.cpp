#include "checkpoint_manager.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../graph/graph.h"
#include "../vulkan/error.h"
#include "atomic_file.h"
#include "checkpoint.h"
#include "checkpoint_index.h"

namespace vkt {

namespace fs = std::filesystem;

namespace {

// Appended to a failed save's error: the user must learn that nothing was lost.
std::string what_is_intact(const std::string& previous) {
  if (previous.empty()) return "there was no earlier checkpoint to lose";
  return fmt::format("the previous checkpoint '{}' is intact and the index still names it",
                     previous);
}

}  // namespace

CheckpointManager::CheckpointManager(std::string dir, int keep_max)
    : dir_(std::move(dir)), keep_max_(keep_max) {
  if (keep_max_ < 1) {
    throw Error(fmt::format("CheckpointManager: keep_max is {}; it must be at least 1", keep_max_));
  }
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) {
    throw Error(
        fmt::format("CheckpointManager: cannot create directory '{}': {}", dir_, ec.message()));
  }
}

std::string CheckpointManager::index_path() const {
  return (fs::path(dir_) / "checkpoint").string();
}

std::vector<std::string> CheckpointManager::read_index() const {
  std::ifstream in(index_path());
  if (!in) return {};
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(fmt::format("checkpoint index '{}' cannot be read", index_path()));
  return detail::parse_checkpoint_index(text.str(), index_path());
}

CheckpointManager::Removed CheckpointManager::remove_interrupted_saves() {
  Removed removed;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir_, ec)) {
    const std::string name = e.path().filename().string();
    const std::string_view target = atomic_write_target(name);
    if (target.empty() || !(target == "checkpoint" || detail::is_checkpoint_file_name(target))) {
      continue;
    }
    std::error_code file_ec;
    if (!e.is_regular_file(file_ec)) continue;
    const std::uintmax_t bytes = e.file_size(file_ec);
    const bool sized = !file_ec;
    if (!fs::remove(e.path(), file_ec)) continue;  // gone already, or not ours to remove
    ++removed.files;
    if (sized) removed.bytes += bytes;
  }
  return removed;
}

std::string CheckpointManager::save(Graph& graph) {
  return save(graph.global_step(), [&](const std::string& path) { save_checkpoint(graph, path); });
}

std::string CheckpointManager::save(std::uint64_t step,
                                    const std::function<void(const std::string&)>& write) {
  const std::string name = detail::checkpoint_file_name(step);
  const std::string path = (fs::path(dir_) / name).string();
  std::vector<std::string> all = read_index();
  const bool indexed = std::ranges::find(all, name) != all.end();
  const std::string previous = all.empty() ? "" : (fs::path(dir_) / all.back()).string();
  try {
    write(path);
  } catch (const FileWriteError& e) {
    // A file the index does not name is nobody's checkpoint; removing it gives
    // a full disk its space back (a failed directory fsync leaves one in place).
    // Other failures (a lost device) keep their type and left no file.
    std::error_code ec;
    if (!indexed) fs::remove(path, ec);
    throw FileWriteError(fmt::format("{}; {}", e.what(), what_is_intact(previous)));
  }

  std::erase(all, name);  // saving the same step again makes it the newest
  all.push_back(name);
  std::vector<std::string> dropped;
  while (static_cast<int>(all.size()) > keep_max_) {
    dropped.push_back(all.front());
    all.erase(all.begin());
  }
  try {
    // Names relative to dir_, so a model directory can be moved as a whole.
    write_file_atomically(index_path(), detail::format_checkpoint_index(all));
  } catch (const FileWriteError& e) {
    throw FileWriteError(
        fmt::format("{}; {}", e.what(), after_failed_index(name, indexed, previous)));
  }
  // Only after the index stops naming them: a crash here leaves stray files, not
  // an index that points at deleted ones. A failed index write never gets here.
  for (const std::string& old : dropped) {
    std::error_code ec;
    fs::remove(fs::path(dir_) / old, ec);
  }
  return path;
}

std::string CheckpointManager::after_failed_index(const std::string& name, bool was_indexed,
                                                  const std::string& previous) const {
  const std::string path = (fs::path(dir_) / name).string();
  if (was_indexed) {
    return fmt::format("'{}' was rewritten for the same step; {}", path, what_is_intact(previous));
  }
  // The index's rename may have happened before its directory fsync failed:
  // then the index names the new file, which must stay.
  try {
    const std::vector<std::string> now = read_index();
    if (std::ranges::find(now, name) != now.end()) {
      return fmt::format("the index was renamed into place and names '{}'; nothing was pruned",
                         path);
    }
  } catch (const Error& e) {
    return fmt::format("'{}' was left in place ({})", path, e.what());
  }
  std::error_code ec;
  fs::remove(path, ec);
  return fmt::format("the new checkpoint '{}' was removed again; {}", path,
                     what_is_intact(previous));
}

std::optional<std::string> CheckpointManager::latest() const {
  const std::vector<std::string> all = read_index();
  if (all.empty()) return std::nullopt;
  return (fs::path(dir_) / all.back()).string();
}

bool CheckpointManager::restore_latest(Graph& graph) {
  const std::optional<std::string> path = latest();
  if (!path) return false;
  load_checkpoint(graph, *path);
  return true;
}

}  // namespace vkt
