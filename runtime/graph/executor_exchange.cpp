// The Executor's cross_replica_sum points: the host's part of a step that
// sums a value over the model's replicas (synchronized batch norm).
#include <algorithm>

#include "executor.h"

namespace vkt {

void Executor::record_exchange(const Node& node) {
  Exchange x;
  x.bytes = range(node.output).size();
  x.local = exchanges_.empty() ? 0 : exchanges_.back().sum + align_up(exchanges_.back().bytes, 16);
  x.sum = x.local + align_up(x.bytes, 16);
  stream_.copy(range(node.inputs[0]), BufferRange(exchange_host_, x.local, x.bytes));
  x.segment = stream_.end_segment();
  stream_.copy(BufferRange(exchange_host_, x.sum, x.bytes), range(node.output));
  exchanges_.push_back(x);
}

Ticket Executor::submit_with_exchanges(std::span<const Ticket> waits) {
  std::size_t next = 0;  // the first segment not yet submitted
  for (std::size_t k = 0; k < exchanges_.size(); ++k) {
    const Exchange& x = exchanges_[k];
    last_ = stream_.submit_segments(next, x.segment + 1 - next,
                                    next == 0 ? waits : std::span<const Ticket>{});
    graph_->set_last_run(last_);
    last_.wait();
    std::byte* host = exchange_host_.host().data();
    const std::span<const float> local(reinterpret_cast<const float*>(host + x.local), x.bytes / 4);
    const std::span<float> sum(reinterpret_cast<float*>(host + x.sum), x.bytes / 4);
    if (options_.replica_sum) {
      options_.replica_sum(k, local, sum);
    } else {
      std::copy(local.begin(), local.end(), sum.begin());
    }
    next = x.segment + 1;
  }
  return stream_.submit_segments(next, stream_.segment_count() - next);
}

}  // namespace vkt
