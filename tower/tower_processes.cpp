// TowerRun across processes: the model check and rank 0's state at start-up,
// the step's exchange between processes, and checkpoints read by rank 0 alone.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "../runtime/io/atomic_file.h"
#include "../runtime/io/checkpoint.h"
#include "../runtime/mpi/process_group.h"
#include "../runtime/vulkan/error.h"
#include "gradient_exchange.h"
#include "model_digest.h"
#include "optimizer_calls.h"
#include "tower_run.h"
#include "towers.h"
#include "weight_update.h"

namespace vkt {

namespace fs = std::filesystem;

namespace {

const char* mode_name(Mode mode) {
  return mode == Mode::Train ? "train" : mode == Mode::Eval ? "eval" : "predict";
}

/// A file of this process's own, removed when it goes.
struct TemporaryFile {
  std::string path;
  TemporaryFile() {
    static std::atomic<int> next{0};
    path =
        (fs::temp_directory_path() / fmt::format("vktower-{}-{}.safetensors", ::getpid(), next++))
            .string();
  }
  ~TemporaryFile() {
    std::error_code ec;
    fs::remove(path, ec);
  }
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("checkpoint '{}' cannot be opened", path));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// What rank 0 sends in place of a checkpoint it could not read, so every rank
// throws its error instead of waiting for bytes that never come.
constexpr std::string_view kUnreadable = "vktower: unreadable checkpoint: ";

}  // namespace

std::vector<std::string> TowerRun::describe(const ModelContext& root) const {
  std::vector<std::string> lines{
      fmt::format("mode {}", mode_name(mode_)), fmt::format("towers per process {}", towers()),
      fmt::format("accumulate steps {}", root.distribution().accumulate_steps),
      fmt::format("loss reduction {}", static_cast<int>(options_.loss_reduction)),
      fmt::format("variable mode {}", static_cast<int>(options_.variable_mode))};
  for (const auto* group : {&root.feature_specs(), &root.label_specs()}) {
    for (const auto& [name, spec] : *group) {
      lines.push_back(fmt::format("{} '{}' {} {}",
                                  group == &root.feature_specs() ? "feature" : "label", name,
                                  spec.shape.str(), to_string(spec.dtype)));
    }
  }
  for (const Variable& v : towers_->front().graph->variables()) {
    const DType dtype = v.tensor.dtype();
    lines.push_back(fmt::format("variable '{}' {}{}{}", v.tensor.name(), v.tensor.shape().str(),
                                is_half(dtype) ? fmt::format(" {}", to_string(dtype)) : "",
                                v.trainable ? "" : " (not trainable)"));
  }
  for (std::size_t c = 0; c < calls_->calls.size(); ++c) {
    std::string vars;
    for (const GradVar& gv : calls_->calls[c].per_tower[0]) vars += " '" + gv.var.name() + "'";
    lines.push_back(
        fmt::format("optimizer call {}: {} on{}", c, calls_->calls[c].optimizer->name(), vars));
  }
  return lines;
}

void TowerRun::join_processes(const ModelContext& root) {
  check_same_model(*distribution_.processes, describe(root));
  if (mode_ != Mode::Train) return;  // eval and predict read rank 0's checkpoint
  if (exchange_) {
    // A synchronized batch norm's sums over the processes run during the
    // step: then the buckets' exchange waits for the step's end, so the
    // collectives keep one order.
    const bool may_overlap = options_.variable_mode != VariableMode::RoundRobin &&
                             towers_->front().executor->replica_sums() == 0;
    // Staged parts go in pieces no larger than the devices' own host transfers.
    const std::size_t chunk = std::min(std::size_t{16} << 20, device_options().staging_chunk_bytes);
    exchange_->join(*distribution_.processes, update_->gathered(), chunk, may_overlap);
  }
  // Every rank starts from rank 0's variables, whatever its own seed made.
  restore_from_rank0(std::nullopt);
}

void TowerRun::restore_from_rank0(const std::optional<std::string>& path) {
  std::string bytes;
  TemporaryFile file;
  if (rank() == 0) {
    try {
      if (path) {
        bytes = read_bytes(*path);
      } else {
        save(file.path);
        bytes = read_bytes(file.path);
      }
    } catch (const Error& e) {
      bytes = std::string(kUnreadable) + e.what();
    }
  }
  bytes = distribution_.processes->broadcast(
      bytes, 0, path ? "restoring rank 0's checkpoint" : "start-up: rank 0's initial variables");
  if (bytes.starts_with(kUnreadable)) throw Error(bytes.substr(kUnreadable.size()));
  if (rank() == 0 && path) return restore_local(*path);
  write_file_atomically(file.path, bytes);
  restore_local(file.path);
}

}  // namespace vkt
