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
}

void ProcessExchange::run(std::span<const Ticket> ready, const std::string& what) {
  for (const Ticket& t : ready) t.wait();
  for (const Part& p : sums_) sum(p, what);
  for (const Part& p : blocks_) gather(p, what);
}

void ProcessExchange::sum(const Part& part, const std::string& what) {
  const std::string label = what + ": the gradients' sum over processes";
  if (part.buffer->mapped()) {
    std::span<std::byte> bytes = part.buffer->host().subspan(part.offset, part.bytes);
    processes_.allreduce_sum(
        std::span<float>(reinterpret_cast<float*>(bytes.data()), bytes.size() / 4), label);
    return;
  }
  host_.resize(std::min(chunk_bytes_, part.bytes));
  for (std::size_t done = 0; done < part.bytes; done += host_.size()) {
    const std::span<std::byte> chunk(host_.data(), std::min(host_.size(), part.bytes - done));
    part.buffer->download(chunk, part.offset + done);
    processes_.allreduce_sum(
        std::span<float>(reinterpret_cast<float*>(chunk.data()), chunk.size() / 4), label);
    part.buffer->upload(chunk, part.offset + done);
  }
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
  std::vector<std::byte> all(part.bytes);
  part.buffer->download(std::span(all).subspan(mine, block), part.offset + mine);
  processes_.allgather(std::span(all).subspan(mine, block), all, label);
  part.buffer->upload(all, part.offset);
}

}  // namespace vkt
