#include "process_exchange.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "../runtime/graph/half.h"
#include "../runtime/mpi/process_group.h"
#include "../runtime/vulkan/error.h"
#include "half_packing.h"

namespace vkt {
namespace {

/// The host's span conversions of `exchange`; none for F32.
std::optional<HalfFormat> span_format(DType exchange) {
  switch (exchange) {
    case DType::F32:
      return std::nullopt;
    case DType::F16:
      return HalfFormat{"f16", widen_f16, round_to_f16};
    case DType::BF16:
      return HalfFormat{"bf16", widen_bf16, round_to_bf16};
    default:
      throw Error(fmt::format("internal: gradients exchanged between processes as {}",
                              to_string(exchange)));
  }
}

}  // namespace

ProcessExchange::ProcessExchange(ProcessGroup& processes, std::vector<Part> sums,
                                 std::vector<Part> blocks, std::size_t chunk_bytes, DType exchange)
    : processes_(processes),
      sums_(std::move(sums)),
      blocks_(std::move(blocks)),
      chunk_bytes_(chunk_bytes - chunk_bytes % 4),
      exchange_(exchange),
      half_(span_format(exchange)) {
  if (chunk_bytes_ == 0) throw Error("ProcessExchange: the chunk must hold at least one float");
  const auto size = static_cast<std::size_t>(processes_.size());
  for (const Part& p : sums_) {
    if (p.buffer == nullptr || p.bytes % 4 != 0 || p.offset % 4 != 0) {
      throw Error("internal: a summed part is not a range of whole floats");
    }
  }
  for (const Part& p : blocks_) {
    if (p.buffer == nullptr || p.bytes % size != 0) {
      throw Error(fmt::format("internal: a gathered part of {} bytes is not {} equal blocks",
                              p.bytes, size));
    }
  }
  staged_.resize(sums_.size());
  for (std::size_t k = 0; k < sums_.size(); ++k) {
    if (sums_[k].bytes > 0) build_staged(sums_[k], staged_[k]);
  }
  for (const Part& p : blocks_) gathered_.push_back(build_gathered(p));
  if (half_) {  // a chunk of the largest mapped part's floats, rounded on the host in the step
    std::size_t largest = 0;
    for (const Part& p : sums_) {
      if (p.buffer->mapped()) largest = std::max(largest, p.bytes / sizeof(float));
    }
    packed_.resize(std::min(largest, chunk_bytes_ / sizeof(float)));
  }
}

void ProcessExchange::build_staged(const Part& part, Staged& staged) {
  using Direction = StagedRange::Direction;
  if (part.buffer->mapped()) {  // summed in place: one chunk, nothing copied
    const BufferRange whole(*part.buffer, part.offset, part.bytes);
    staged.down.emplace_back(whole, Direction::ToHost);
    staged.up.emplace_back(whole, Direction::ToDevice);
    staged.values.push_back(part.bytes / sizeof(float));
    return;
  }
  if (half_) {
    build_packed(part, staged);
    return;
  }
  Device& device = part.buffer->device();
  const std::size_t chunk = std::min(chunk_bytes_, part.bytes);
  for (auto& b : staged.staging) b = std::make_unique<Buffer>(device, chunk, BufferKind::Staging);
  for (std::size_t done = 0, c = 0; done < part.bytes; done += chunk, ++c) {
    const std::size_t bytes = std::min(chunk, part.bytes - done);
    const BufferRange on_device(*part.buffer, part.offset + done, bytes);
    // One queue for every chunk's copies: the last upload follows the others.
    const StagedRange::Options options{.queue = QueueKind::Compute,
                                       .through = BufferRange(*staged.staging[c % 2], 0, bytes)};
    staged.down.emplace_back(on_device, Direction::ToHost, options);
    staged.up.emplace_back(on_device, Direction::ToDevice, options);
    staged.values.push_back(bytes / sizeof(float));
    staged_sum_bytes_ += 2 * bytes;
  }
}

void ProcessExchange::build_packed(const Part& part, Staged& staged) {
  using Direction = StagedRange::Direction;
  Device& device = part.buffer->device();
  const std::size_t chunk = std::min(chunk_bytes_, part.bytes);
  const std::size_t chunk_words = packed_bytes(chunk / sizeof(float));
  for (int b = 0; b < 2; ++b) {
    staged.staging[b] = std::make_unique<Buffer>(device, chunk_words, BufferKind::Staging);
    staged.words[b] = std::make_unique<Buffer>(device, chunk_words);
  }
  for (std::size_t done = 0, c = 0; done < part.bytes; done += chunk, ++c) {
    const std::size_t bytes = std::min(chunk, part.bytes - done);
    const std::size_t values = bytes / sizeof(float);
    const BufferRange on_device(*part.buffer, part.offset + done, bytes);
    const BufferRange words(*staged.words[c % 2], 0, packed_bytes(values));
    // Recorded into this chunk's streams, on the one queue every chunk uses.
    const StagedRange::Options options{
        .queue = QueueKind::Compute,
        .through = BufferRange(*staged.staging[c % 2], 0, packed_bytes(values)),
        .submits = false};
    staged.down.emplace_back(words, Direction::ToHost, options);
    staged.up.emplace_back(words, Direction::ToDevice, options);
    Stream& pack = staged.pack.emplace_back(device, QueueKind::Compute);
    record_pack_half(pack, on_device, words, exchange_);
    staged.down.back().record_into(pack);
    Stream& unpack = staged.unpack.emplace_back(device, QueueKind::Compute);
    staged.up.back().record_into(unpack);
    record_unpack_half(unpack, words, on_device, exchange_);
    staged.values.push_back(values);
    staged_sum_bytes_ += 2 * packed_bytes(values);
  }
}

Ticket ProcessExchange::Staged::submit_down(std::size_t c, std::span<const Ticket> waits) {
  return pack.empty() ? down[c].submit(waits) : pack[c].submit(waits);
}

Ticket ProcessExchange::Staged::submit_up(std::size_t c) {
  return unpack.empty() ? up[c].submit() : unpack[c].submit();
}

ProcessExchange::Gathered ProcessExchange::build_gathered(const Part& part) const {
  using Direction = StagedRange::Direction;
  const std::size_t block = part.bytes / static_cast<std::size_t>(processes_.size());
  const std::size_t mine = static_cast<std::size_t>(processes_.rank()) * block;
  const BufferRange whole(*part.buffer, part.offset, part.bytes);
  const BufferRange ours(*part.buffer, part.offset + mine, block);
  Gathered g;
  if (part.buffer->mapped()) {  // gathered in place
    g.mine = StagedRange(ours, Direction::ToHost);
    g.all = StagedRange(whole, Direction::ToDevice);
    return g;
  }
  // Sparse rows are small beside the dense sums: the whole part on the host.
  g.staging = std::make_unique<Buffer>(part.buffer->device(), part.bytes, BufferKind::Staging);
  g.mine = StagedRange(ours, Direction::ToHost, {.through = BufferRange(*g.staging, mine, block)});
  g.all = StagedRange(whole, Direction::ToDevice, {.through = BufferRange(*g.staging)});
  return g;
}

std::vector<Ticket> ProcessExchange::run(std::span<const Ticket> ready, const std::string& what) {
  std::vector<Ticket> done(sums_.size());
  for (std::size_t k = 0; k < sums_.size(); ++k) done[k] = sum(k, ready, what);
  gather(ready, what);
  return done;
}

void ProcessExchange::gather(std::span<const Ticket> ready, const std::string& what) {
  if (blocks_.empty()) return;
  for (const Ticket& t : ready) t.wait();
  for (Gathered& g : gathered_) gather(g, what);
}

Ticket ProcessExchange::sum(std::size_t k, std::span<const Ticket> ready, const std::string& what) {
  const Part& part = sums_[k];
  // Nothing to sum (a bucket of sparse rows alone): the same on every rank,
  // whose models were checked alike.
  if (part.bytes == 0) return Ticket{};
  const std::string label = what + ": the gradients' sum over processes";
  // The ready tickets of this part's device; the others' work is not its.
  std::vector<Ticket> waits;
  for (const Ticket& t : ready) {
    if (t.device == &part.buffer->device()) waits.push_back(t);
  }
  // Chunk c + 1 comes down while chunk c is exchanged; staging buffer c % 2 is
  // written again only after chunk c's upload has read it. A mapped part is
  // one chunk, summed in place.
  Staged& s = staged_[k];
  const std::size_t chunks = s.down.size();
  std::vector<Ticket> down(chunks), up(chunks);
  down[0] = s.submit_down(0, waits);
  for (std::size_t c = 0; c < chunks; ++c) {
    if (c + 1 < chunks) {
      std::vector<Ticket> before = waits;
      if (c >= 1) before.push_back(up[c - 1]);
      down[c + 1] = s.submit_down(c + 1, before);
    }
    down[c].wait();
    allreduce_chunk(s, c, label);
    up[c] = s.submit_up(c);
  }
  return up.back();  // one queue: the last upload follows the others
}

void ProcessExchange::allreduce_chunk(Staged& s, std::size_t c, const std::string& what) {
  const std::span<std::byte> host = s.down[c].host();
  if (!s.pack.empty()) {  // half words the device packed
    processes_.allreduce_sum(
        std::span<std::uint16_t>(reinterpret_cast<std::uint16_t*>(host.data()), s.values[c]),
        *half_, what);
    return;
  }
  allreduce(std::span<float>(reinterpret_cast<float*>(host.data()), s.values[c]), what);
}

void ProcessExchange::allreduce(std::span<float> values, const std::string& what) {
  if (!half_) {
    processes_.allreduce_sum(values, what);
    return;
  }
  // A mapped part is one chunk of any size: packed a staging chunk's worth at
  // a time, so the host holds no second copy of a large model's gradients.
  const std::size_t piece = chunk_bytes_ / sizeof(float);
  for (std::size_t begin = 0; begin < values.size(); begin += piece) {
    const std::span<float> part = values.subspan(begin, std::min(piece, values.size() - begin));
    const std::span<std::uint16_t> packed(packed_.data(), part.size());
    half_->round(part, packed);
    processes_.allreduce_sum(packed, *half_, what);
    half_->widen(packed, part);
  }
}

void ProcessExchange::gather(Gathered& part, const std::string& what) {
  const std::string label = what + ": the sparse rows of every process";
  part.mine.submit().wait();
  processes_.allgather(part.mine.host(), part.all.host(), label);
  part.all.submit().wait();
}

}  // namespace vkt
