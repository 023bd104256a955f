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
#include "model_digest.h"
#include "optimizer_calls.h"
#include "overlapped_exchange.h"
#include "process_exchange.h"
#include "tower_run.h"

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
  for (const Variable& v : towers_.front().graph->variables()) {
    lines.push_back(fmt::format("variable '{}' {}{}", v.tensor.name(), v.tensor.shape().str(),
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
  std::vector<ProcessExchange::Part> sums, blocks;
  // Each bucket summed over the processes as soon as this process has it
  // (OverlappedExchange), unless a synchronized batch norm's sums over the
  // processes run during the step too: collectives must keep one order.
  const bool overlaps = shares_.empty() && reducer_ && (master_ || mirrored_sum_) &&
                        towers_.front().executor->replica_sums() == 0;
  if (overlaps) {
    for (int b = 0; b < reducer_->buckets(); ++b) {
      const BufferRange r = reducer_->bucket_range(b);
      sums.push_back({const_cast<Buffer*>(r.buffer), r.offset, r.size()});
    }
  }
  if (master_) {
    if (reducer_ && !overlaps) {
      sums.push_back({&master_executor_->gradient_arena(), 0, reducer_->sum().size()});
    }
    for (const BufferRange& r : master_sparse_) {  // every one in the master's gradient arena
      blocks.push_back({&master_executor_->gradient_arena(), r.offset, r.size()});
    }
  } else if (mirrored_sum_ && !overlaps) {
    sums.push_back({&mirrored_sum_, 0, reducer_->sum().size()});
  }
  for (Share& share : shares_) {
    if (!share.reducer) continue;
    sums.push_back({&share.executor->gradient_arena(), share.reducer->sum().offset,
                    share.reducer->sum().size()});
  }
  // Staged parts go in pieces no larger than the devices' own host transfers.
  const std::size_t chunk = std::min(std::size_t{16} << 20, device_options().staging_chunk_bytes);
  exchange_ = std::make_unique<ProcessExchange>(*distribution_.processes, std::move(sums),
                                                std::move(blocks), chunk);
  if (overlaps) {
    overlap_ = std::make_unique<OverlappedExchange>(*exchange_);
    reducer_->on_summed([overlap = overlap_.get()](int bucket, const Ticket& ready) {
      overlap->summed(static_cast<std::size_t>(bucket), ready);
    });
  }
  // Every rank starts from rank 0's variables, whatever its own seed made.
  restore_from_rank0(std::nullopt);
}

void TowerRun::gradients_complete(std::vector<Ticket>& summed) {
  if (!exchange_) return;  // one process: its sums are the step's
  const auto start = std::chrono::steady_clock::now();
  std::vector<Ticket> ready = sparse_arrived_;
  for (const Ticket& t : summed) {
    if (t.device != nullptr) ready.push_back(t);
  }
  const std::string what = fmt::format("step {}", global_step() + 1);
  if (overlap_ && overlap_->active()) {
    // The buckets were exchanged as they were summed; the update follows the
    // last one's upload (one queue). The sparse rows go now.
    Ticket last;
    for (const Ticket& t : overlap_->finish()) {
      if (t.device != nullptr && t.value > last.value) last = t;
    }
    exchange_->gather(ready, what);
    summed.front() = last;
    times_.processes =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return;
  }
  const std::vector<Ticket> exchanged = exchange_->run(ready, what);
  // One summed part per reducer: the master's or Mirrored's, or each share's
  // that has one (in share order, as `summed`).
  std::size_t k = 0;
  for (std::size_t j = 0; j < summed.size() && k < exchanged.size(); ++j) {
    if (!shares_.empty() && !shares_[j].reducer) continue;
    summed[j] = exchanged[k++];
  }
  times_.processes =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
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
