// Executor::profile(): the stream's per-command times, each named after the op
// that recorded it.
#include "../vulkan/device.h"
#include "executor.h"

namespace vkt {

std::vector<Executor::CommandProfile> Executor::profile() const {
  std::vector<CommandProfile> out;
  if (!options_.profile || !graph_->device().info().timestamps) return out;
  for (const Stream::CommandTime& t : stream_.command_times()) {
    CommandProfile p{.kernel = t.label, .op = "feed", .tensor = {}, .ms = t.ns / 1e6};
    const int node = t.command < command_node_.size() ? command_node_[t.command] : -1;
    if (node >= 0) {
      const Node& n = graph_->nodes()[static_cast<std::size_t>(node)];
      p.op = n.op->type();
      p.tensor = n.output.name();
    }
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace vkt
