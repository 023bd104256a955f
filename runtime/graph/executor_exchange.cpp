// The Executor's cross_replica_sum points: the host's part of a step that
// sums a value over the model's replicas (synchronized batch norm).
#include <algorithm>

#include "executor.h"

namespace vkt {

void Executor::record_exchange(const Node& node) {
  // Always staged, even where mapped: the host reads the value the step had
  // at this point, and its sum goes in at the next segment's start.
  const std::size_t bytes = range(node.output).size();
  const std::size_t local = exchanges_.empty() ? 0 : exchanges_.back().host_end;
  const std::size_t sum = local + align_up(bytes, 16);
  Exchange x;
  x.host_end = sum + align_up(bytes, 16);
  x.local = StagedRange(range(node.inputs[0]), StagedRange::Direction::ToHost,
                        {.through = BufferRange(exchange_host_, local, bytes),
                         .even_if_mapped = true,
                         .submits = false});
  x.sum = StagedRange(range(node.output), StagedRange::Direction::ToDevice,
                      {.through = BufferRange(exchange_host_, sum, bytes),
                       .even_if_mapped = true,
                       .submits = false});
  x.local.record_into(stream_);
  x.segment = stream_.end_segment();
  x.sum.record_into(stream_);
  exchanges_.push_back(std::move(x));
}

Ticket Executor::submit_with_exchanges(std::span<const Ticket> waits) {
  std::size_t next = 0;  // the first segment not yet submitted
  for (std::size_t k = 0; k < exchanges_.size(); ++k) {
    const Exchange& x = exchanges_[k];
    last_ = stream_.submit_segments(next, x.segment + 1 - next,
                                    next == 0 ? waits : std::span<const Ticket>{});
    graph_->set_last_run(last_);
    last_.wait();
    const std::span<std::byte> in = x.local.host(), out = x.sum.host();
    const std::span<const float> local(reinterpret_cast<const float*>(in.data()), in.size() / 4);
    const std::span<float> sum(reinterpret_cast<float*>(out.data()), out.size() / 4);
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
