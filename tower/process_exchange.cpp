#include "process_exchange.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "../runtime/mpi/process_group.h"
#include "../runtime/vulkan/error.h"

namespace vkt {

ProcessExchange::ProcessExchange(ProcessGroup& processes, std::vector<Part> sums,
                                 std::vector<Part> blocks, std::size_t chunk_bytes)
    : processes_(processes),
      sums_(std::move(sums)),
      blocks_(std::move(blocks)),
      chunk_bytes_(chunk_bytes - chunk_bytes % 4) {
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
    if (!sums_[k].buffer->mapped() && sums_[k].bytes > 0) build_staged(sums_[k], staged_[k]);
  }
}

void ProcessExchange::build_staged(const Part& part, Staged& staged) const {
  Device& device = part.buffer->device();
  const std::size_t chunk = std::min(chunk_bytes_, part.bytes);
  for (Buffer& b : staged.staging) b = Buffer(device, chunk, BufferKind::Staging);
  for (std::size_t done = 0, c = 0; done < part.bytes; done += chunk, ++c) {
    const std::size_t bytes = std::min(chunk, part.bytes - done);
    const BufferRange on_device(*part.buffer, part.offset + done, bytes);
    const BufferRange on_host(staged.staging[c % 2], 0, bytes);
    staged.sizes.push_back(bytes);
    staged.down.emplace_back(device).copy(on_device, on_host);
    staged.up.emplace_back(device).copy(on_host, on_device);
  }
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
  for (const Part& p : blocks_) gather(p, what);
}

Ticket ProcessExchange::sum(std::size_t k, std::span<const Ticket> ready, const std::string& what) {
  const Part& part = sums_[k];
  // Nothing to sum (a bucket of sparse rows alone): the same on every rank,
  // whose models were checked alike.
  if (part.bytes == 0) return Ticket{};
  const std::string label = what + ": the gradients' sum over processes";
  const auto floats = [](std::span<std::byte> bytes) {
    return std::span<float>(reinterpret_cast<float*>(bytes.data()), bytes.size() / 4);
  };
  // The ready tickets of this part's device; the others' work is not its.
  std::vector<Ticket> waits;
  for (const Ticket& t : ready) {
    if (t.device == &part.buffer->device()) waits.push_back(t);
  }
  if (part.buffer->mapped()) {
    for (const Ticket& t : waits) t.wait();
    processes_.allreduce_sum(floats(part.buffer->host().subspan(part.offset, part.bytes)), label);
    return Ticket{};
  }
  // Chunk c + 1 comes down while chunk c is exchanged; staging buffer c % 2 is
  // written again only after chunk c's upload has read it.
  Staged& s = staged_[k];
  const std::size_t chunks = s.sizes.size();
  std::vector<Ticket> down(chunks), up(chunks);
  down[0] = s.down[0].submit(waits);
  for (std::size_t c = 0; c < chunks; ++c) {
    if (c + 1 < chunks) {
      std::vector<Ticket> before = waits;
      if (c >= 1) before.push_back(up[c - 1]);
      down[c + 1] = s.down[c + 1].submit(before);
    }
    down[c].wait();
    processes_.allreduce_sum(floats(s.staging[c % 2].host().first(s.sizes[c])), label);
    up[c] = s.up[c].submit();
  }
  return up.back();  // one queue: the last upload follows the others
}

void ProcessExchange::gather(const Part& part, const std::string& what) {
  const std::string label = what + ": the sparse rows of every process";
  const std::size_t block = part.bytes / static_cast<std::size_t>(processes_.size());
  const std::size_t mine = static_cast<std::size_t>(processes_.rank()) * block;
  if (part.buffer->mapped()) {
    std::span<std::byte> all = part.buffer->host().subspan(part.offset, part.bytes);
    processes_.allgather(all.subspan(mine, block), all, label);
    return;
  }
  // Sparse rows are small beside the dense sums: the whole part on the host.
  gathered_.resize(part.bytes);
  const std::span<std::byte> all(gathered_);
  part.buffer->download(all.subspan(mine, block), part.offset + mine);
  processes_.allgather(all.subspan(mine, block), all, label);
  part.buffer->upload(std::span<const std::byte>(all), part.offset);
}

}  // namespace vkt
