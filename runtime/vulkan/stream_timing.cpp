// Stream's timestamps and per-command profile (stream.h): query pools made
// as needed, read back after the submission they measured.
#include <fmt/format.h>

#include <algorithm>

#include "detail/vk_check.h"
#include "device.h"
#include "error.h"
#include "stream.h"

namespace vkt {
namespace {

// Timestamps per query pool; a stream makes more pools as it needs them.
constexpr std::uint32_t kQueriesPerPool = 64;
// Timestamps this close are read together by elapsed_ns().
constexpr std::size_t kNearTimestamps = 16;

}  // namespace

std::size_t Stream::timestamp() {
  check_recording("record a timestamp");
  if (!device_->info().timestamps) {
    throw Error(fmt::format("device {} ({}) has no timestamp queries on its compute queue",
                            device_->info().index, device_->info().name));
  }
  const std::size_t pool = timestamps_ / kQueriesPerPool;
  const auto slot = static_cast<std::uint32_t>(timestamps_ % kQueriesPerPool);
  if (pool == query_pools_.size()) {
    VkQueryPoolCreateInfo info{};
    info.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
    info.queryType = VK_QUERY_TYPE_TIMESTAMP;
    info.queryCount = kQueriesPerPool;
    VkQueryPool created = VK_NULL_HANDLE;
    VKT_CHECK(vkCreateQueryPool(device_->vk_device(), &info, nullptr, &created));
    query_pools_.emplace_back(device_->vk_device(), created);
  }
  // Reset and written by every replay, so each submission measures itself.
  const VkQueryPool queries = query_pools_[pool].get();
  record([queries, slot](VkCommandBuffer commands) {
    vkCmdResetQueryPool(commands, queries, slot, 1);
    vkCmdWriteTimestamp(commands, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries, slot);
  });
  return timestamps_++;
}

void Stream::read_timestamps(std::size_t first, std::span<std::uint64_t> values) const {
  last_.wait();
  // One call per pool the range touches.
  for (std::size_t done = 0; done < values.size();) {
    const std::size_t index = first + done;
    const auto slot = static_cast<std::uint32_t>(index % kQueriesPerPool);
    const std::size_t count = std::min<std::size_t>(values.size() - done, kQueriesPerPool - slot);
    VKT_CHECK(vkGetQueryPoolResults(
        device_->vk_device(), query_pools_[index / kQueriesPerPool].get(), slot,
        static_cast<std::uint32_t>(count), count * sizeof(std::uint64_t), &values[done],
        sizeof(std::uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
    done += count;
  }
}

double Stream::elapsed_ns(std::size_t from, std::size_t to) const {
  if (from >= timestamps_ || to >= timestamps_) {
    throw Error(fmt::format("elapsed_ns: timestamps {} and {} of {}", from, to, timestamps_));
  }
  // Near ones (a run's first and last) in one read: each is a trip to
  // lavapipe's queue thread, about half a bare submit's round trip.
  const std::size_t lo = std::min(from, to), hi = std::max(from, to);
  std::uint64_t values[kNearTimestamps];
  std::uint64_t at_from = 0, at_to = 0;
  if (hi - lo < kNearTimestamps) {
    read_timestamps(lo, std::span<std::uint64_t>(values, hi - lo + 1));
    at_from = values[from - lo];
    at_to = values[to - lo];
  } else {
    read_timestamps(from, std::span<std::uint64_t>(&at_from, 1));
    read_timestamps(to, std::span<std::uint64_t>(&at_to, 1));
  }
  // Signed: `to` may be the earlier one.
  return static_cast<double>(static_cast<std::int64_t>(at_to - at_from)) *
         device_->info().timestamp_period_ns;
}

void Stream::profile_commands() {
  check_recording("profile commands");
  if (!profile_start_) profile_start_ = timestamp();
}

void Stream::profile_command(std::string label) {
  profiled_.push_back({commands_ - 1, std::move(label), timestamp()});
}

std::vector<Stream::CommandTime> Stream::command_times() const {
  if (!profile_start_) {
    throw Error("command_times: call profile_commands() before recording the commands to time");
  }
  std::vector<CommandTime> times;
  if (profiled_.empty()) return times;
  // Every timestamp from the first to the last profiled one (timestamp() calls
  // in between included, which the intervals skip).
  const std::size_t first = *profile_start_;
  std::vector<std::uint64_t> values(profiled_.back().timestamp - first + 1);
  read_timestamps(first, values);
  const double period = device_->info().timestamp_period_ns;
  std::size_t before = first;
  for (const Profiled& p : profiled_) {
    const auto ticks =
        static_cast<std::int64_t>(values[p.timestamp - first] - values[before - first]);
    times.push_back({p.command, p.label, static_cast<double>(ticks) * period});
    before = p.timestamp;
  }
  return times;
}

}  // namespace vkt
