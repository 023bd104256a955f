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

std::string CheckpointManager::save(Graph& graph) {
  return save(graph.global_step(), [&](const std::string& path) { save_checkpoint(graph, path); });
}

std::string CheckpointManager::save(std::uint64_t step,
                                    const std::function<void(const std::string&)>& write) {
  const std::string name = detail::checkpoint_file_name(step);
  const std::string path = (fs::path(dir_) / name).string();
  write(path);

  std::vector<std::string> all = read_index();
  std::erase(all, name);  // saving the same step again makes it the newest
  all.push_back(name);
  std::vector<std::string> dropped;
  while (static_cast<int>(all.size()) > keep_max_) {
    dropped.push_back(all.front());
    all.erase(all.begin());
  }
  // Names relative to dir_, so a model directory can be moved as a whole.
  write_file_atomically(index_path(), detail::format_checkpoint_index(all));
  // Only after the index stops naming them: a crash here leaves stray files, not
  // an index that points at deleted ones.
  for (const std::string& old : dropped) {
    std::error_code ec;
    fs::remove(fs::path(dir_) / old, ec);
  }
  return path;
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
