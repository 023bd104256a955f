#include "gradient_exchange.h"

#include <algorithm>
#include <chrono>

#include "../runtime/graph/graph.h"
#include "overlapped_exchange.h"
#include "process_exchange.h"
#include "towers.h"

namespace vkt {

GradientBuckets plan_gradient_buckets(const std::vector<Tensor>& gradients,
                                      std::size_t bucket_bytes) {
  // The executor places gradients in tensor order, which is the order the
  // backward pass makes (and so writes) them: buckets are consecutive runs of
  // that order, the first ready first.
  std::vector<std::size_t> order(gradients.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return gradients[a].id() < gradients[b].id(); });
  GradientBuckets plan;
  plan.of_gradient.assign(order.size(), 0);
  int bucket = 0;
  std::size_t bytes = 0;
  for (std::size_t k : order) {
    const std::size_t size =
        align_up(static_cast<std::size_t>(gradients[k].shape().elements()) * 4, 16);
    if (bytes > 0 && bytes + size > bucket_bytes) {
      ++bucket;
      bytes = 0;
    }
    plan.of_gradient[k] = bucket;
    bytes += size;
  }
  plan.count = bucket + 1;
  return plan;
}

GradientExchange::GradientExchange(const std::vector<GradientDestination>& destinations,
                                   const std::vector<SparseRows>& sparse, int buckets,
                                   std::size_t towers, int accumulate_steps, DType exchange)
    : buckets_(buckets), exchange_(exchange) {
  for (const GradientDestination& d : destinations) {
    reducers_.push_back(d.sum.buffer == nullptr
                            ? nullptr
                            : std::make_unique<GradientReducer>(d.segments, d.sum, 0, exchange));
  }
  sparse_in_.resize(towers);
  for (auto& per_micro_batch : sparse_in_) {
    per_micro_batch.resize(static_cast<std::size_t>(accumulate_steps));
  }
  for (const SparseRows& rows : sparse) {
    sparse_in_.at(rows.tower)
        .at(static_cast<std::size_t>(rows.micro_batch))
        .push_back(std::make_unique<CrossDeviceCopy>(rows.from, rows.to));
  }
}

GradientExchange::~GradientExchange() = default;

void GradientExchange::join(ProcessGroup& processes, std::vector<BufferRange> gathered,
                            std::size_t chunk_bytes, bool may_overlap) {
  std::vector<ProcessExchange::Part> sums, blocks;
  const auto part = [](const BufferRange& r) {
    return ProcessExchange::Part{const_cast<Buffer*>(r.buffer), r.offset, r.size()};
  };
  // Each bucket summed over the processes as soon as this process has it
  // (OverlappedExchange), unless the step's own sums over the processes (a
  // synchronized batch norm's) run during it too: collectives must keep one order.
  const bool overlaps = may_overlap && reducers_.size() == 1 && reducers_.front();
  if (overlaps) {
    for (int b = 0; b < reducers_.front()->buckets(); ++b) {
      sums.push_back(part(reducers_.front()->bucket_range(b)));
    }
  } else {
    for (const auto& reducer : reducers_) {
      if (reducer) sums.push_back(part(reducer->sum()));
    }
  }
  for (const BufferRange& r : gathered) blocks.push_back(part(r));
  processes_ = std::make_unique<ProcessExchange>(processes, std::move(sums), std::move(blocks),
                                                 chunk_bytes, exchange_);
  if (overlaps) {
    overlap_ = std::make_unique<OverlappedExchange>(*processes_);
    reducers_.front()->on_summed([overlap = overlap_.get()](int bucket, const Ticket& ready) {
      overlap->summed(static_cast<std::size_t>(bucket), ready);
    });
  }
}

void GradientExchange::begin(bool first, bool last, const std::string& what) {
  for (const auto& reducer : reducers_) {
    if (reducer) reducer->set_accumulate(!first);
  }
  if (overlap_ && last) overlap_->begin(what);
}

void GradientExchange::hand_over(std::size_t tower, int bucket, const Ticket& ready) {
  for (const auto& reducer : reducers_) {
    if (reducer) reducer->arrive(tower, bucket, ready);
  }
}

void GradientExchange::abandon() {
  for (const auto& reducer : reducers_) {
    if (reducer) reducer->abandon();
  }
  if (overlap_) overlap_->abandon();
}

GradientExchange::Summed GradientExchange::finish_micro_batch(std::size_t micro,
                                                              std::span<const Ticket> towers_done) {
  Summed summed;
  for (const auto& reducer : reducers_) {
    summed.sums.push_back(reducer ? reducer->finish() : Ticket{});
  }
  for (std::size_t i = 0; i < sparse_in_.size(); ++i) {
    for (const auto& copy : sparse_in_[i].at(micro)) {
      summed.sparse.push_back(copy->start(towers_done.subspan(i, 1))[0]);
    }
  }
  return summed;
}

bool GradientExchange::wait_micro_batch(const Summed& summed, Towers& towers) {
  // The towers' next run overwrites the gradients these copies read, and the
  // next sums reuse the reducers' gathering buffers.
  bool waited = false;
  for (const std::vector<Ticket>* tickets : {&summed.sparse, &summed.sums}) {
    for (const Ticket& ticket : *tickets) {
      if (ticket.device == nullptr) continue;
      const bool on_every_tower =
          std::all_of(towers.begin(), towers.end(),
                      [&](const Towers::Tower& t) { return t.device == ticket.device; });
      if (on_every_tower) {
        towers.run_after(ticket);
      } else {
        ticket.wait();
        waited = true;
      }
    }
  }
  return waited;
}

void GradientExchange::complete(Summed& summed, const std::string& what) {
  if (!processes_) return;  // one process: its sums are the step's
  const auto start = std::chrono::steady_clock::now();
  std::vector<Ticket> ready = summed.sparse;
  for (const Ticket& t : summed.sums) {
    if (t.device != nullptr) ready.push_back(t);
  }
  if (overlap_ && overlap_->active()) {
    // The buckets were exchanged as they were summed; the update follows the
    // last one's upload (one queue). The sparse rows go now.
    Ticket last;
    for (const Ticket& t : overlap_->finish()) {
      if (t.device != nullptr && t.value > last.value) last = t;
    }
    processes_->gather(ready, what);
    summed.sums.front() = last;
  } else {
    const std::vector<Ticket> exchanged = processes_->run(ready, what);
    // One summed part per reducer, in destination order.
    std::size_t k = 0;
    for (std::size_t j = 0; j < summed.sums.size() && k < exchanged.size(); ++j) {
      if (reducers_[j]) summed.sums[j] = exchanged[k++];
    }
  }
  processes_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

std::uint64_t GradientExchange::step_thread_waits() const {
  std::uint64_t waits = 0;
  for (const auto& tower : sparse_in_) {
    for (const auto& micro : tower) {
      for (const auto& copy : micro) waits += copy->host_waits();
    }
  }
  return waits;
}

std::uint64_t GradientExchange::tower_thread_waits() const {
  std::uint64_t waits = 0;
  for (const auto& reducer : reducers_) {
    if (reducer) waits += reducer->host_waits();
  }
  return waits;
}

}  // namespace vkt
