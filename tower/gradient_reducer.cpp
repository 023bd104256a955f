#include "gradient_reducer.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "../runtime/vulkan/device.h"
#include "../runtime/vulkan/error.h"
#include "../runtime/vulkan/kernel.h"
#include "half_packing.h"

namespace vkt {
namespace {

std::size_t checked_bytes(const std::vector<BufferRange>& ranges) {
  if (ranges.empty()) throw Error("GradientReducer: no tower gradients given");
  const std::size_t bytes = ranges.front().size();
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    if (ranges[i].size() != bytes) {
      throw Error(
          fmt::format("GradientReducer: tower {} has {} bytes of gradients but tower 0 has "
                      "{}; every tower must run the same model",
                      i, ranges[i].size(), bytes));
    }
  }
  return bytes;
}

std::size_t round16(std::size_t bytes) {
  return (bytes + 15) / 16 * 16;
}

void check_segments(const std::vector<std::vector<GradientReducer::Segment>>& towers,
                    std::size_t stride) {
  if (towers.empty()) throw Error("GradientReducer: no tower gradients given");
  if (stride % 16 != 0) {
    throw Error(fmt::format("GradientReducer: the destination holds {} bytes, not a multiple of 16",
                            stride));
  }
  for (std::size_t t = 0; t < towers.size(); ++t) {
    if (towers[t].size() != towers[0].size()) {
      throw Error("GradientReducer: every tower must give the same segments");
    }
    for (std::size_t i = 0; i < towers[t].size(); ++i) {
      const GradientReducer::Segment& s = towers[t][i];
      const GradientReducer::Segment& s0 = towers[0][i];
      if (s.source.size() != s0.source.size() || s.offset != s0.offset || s.bucket != s0.bucket ||
          s.offset % 16 != 0 || s.bucket < 0 || s.offset + s.source.size() > stride) {
        throw Error(
            fmt::format("GradientReducer: tower {}'s segment {} does not match tower 0's "
                        "or does not fit the destination",
                        t, i));
      }
    }
  }
}

// A stretch of the destination summed by one dispatch, and the pieces of
// segments in it (index into the segment list, byte offset into the segment,
// bytes).
struct Window {
  int bucket;
  std::size_t lo, hi;
  struct Piece {
    std::size_t segment, skip, bytes;
  };
  std::vector<Piece> pieces;
};

// Cuts each bucket into windows of at most `cap` bytes of the destination,
// splitting segments at 16-byte boundaries where they do not fit (the sum is
// elementwise, so any split gives the same bits).
std::vector<Window> windows_of(const std::vector<GradientReducer::Segment>& segments,
                               std::size_t cap) {
  std::vector<std::size_t> order(segments.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::pair(segments[a].bucket, segments[a].offset) <
           std::pair(segments[b].bucket, segments[b].offset);
  });
  std::vector<Window> windows;
  for (std::size_t i : order) {
    const GradientReducer::Segment& s = segments[i];
    std::size_t done = 0;
    while (done < s.source.size()) {
      const std::size_t at = s.offset + done;
      if (windows.empty() || windows.back().bucket != s.bucket || at >= windows.back().lo + cap) {
        windows.push_back({s.bucket, at, at, {}});
      }
      Window& w = windows.back();
      const std::size_t bytes = std::min(s.source.size() - done, w.lo + cap - at);
      w.pieces.push_back({i, done, bytes});
      w.hi = at + bytes;
      done += bytes;
    }
  }
  // A window's sum writes its whole stretch, gaps included: no two may overlap.
  std::vector<std::pair<std::size_t, std::size_t>> spans;
  for (const Window& w : windows) spans.emplace_back(w.lo, round16(w.hi));
  std::sort(spans.begin(), spans.end());
  for (std::size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].first < spans[i - 1].second) {
      throw Error(
          "GradientReducer: buckets interleave in the destination; give each bucket a "
          "stretch of its own");
    }
  }
  return windows;
}

}  // namespace

GradientReducer::GradientReducer(std::vector<BufferRange> tower_gradients, Device& consolidation,
                                 DType exchange)
    : bytes_(checked_bytes(tower_gradients)),
      exchange_(exchange),
      sum_(consolidation, round16(bytes_)),
      destination_(sum_) {
  build(whole(tower_gradients), 0);
}

GradientReducer::GradientReducer(std::vector<BufferRange> tower_gradients, BufferRange destination)
    : bytes_(checked_bytes(tower_gradients)), destination_(destination) {
  if (destination.size() != round16(bytes_)) {
    throw Error(
        fmt::format("GradientReducer: the destination holds {} bytes, the towers' gradients "
                    "{} ({} rounded up to 16)",
                    destination.size(), round16(bytes_), bytes_));
  }
  build(whole(tower_gradients), 0);
}

GradientReducer::GradientReducer(const std::vector<std::vector<Segment>>& towers,
                                 BufferRange destination, std::size_t max_binding_bytes,
                                 DType exchange)
    : bytes_(destination.size()), exchange_(exchange), destination_(destination) {
  check_segments(towers, destination.size());
  build(towers, max_binding_bytes);
}

std::vector<std::vector<GradientReducer::Segment>> GradientReducer::whole(
    const std::vector<BufferRange>& ranges) {
  std::vector<std::vector<Segment>> out;
  for (const BufferRange& r : ranges) out.push_back({Segment{r, 0, 0}});
  return out;
}

void GradientReducer::build(const std::vector<std::vector<Segment>>& towers,
                            std::size_t max_binding_bytes) {
  Device& device = destination_.buffer->device();
  const std::size_t n = towers.size();
  // The gathered slices of one window are bound together: N of them must fit
  // one binding.
  std::size_t limit = device.max_storage_buffer_range();
  if (max_binding_bytes != 0) limit = std::min(limit, max_binding_bytes);
  const std::size_t cap = limit / n / 16 * 16;
  if (cap == 0) {
    throw Error(
        fmt::format("GradientReducer: {} towers' slices of 16 bytes do not fit one "
                    "binding of {} bytes",
                    n, limit));
  }
  if (exchange_ != DType::F32 && !is_half(exchange_)) {
    throw Error(fmt::format("GradientReducer: gradients travel as f32, f16 or bf16, not {}",
                            to_string(exchange_)));
  }
  const bool half = exchange_ != DType::F32;
  const std::vector<Window> windows = windows_of(towers[0], cap);
  // A window's f32 stretch, and its slice of gathered_ (half the bytes when half).
  const auto len_of = [&](std::size_t w) { return round16(windows[w].hi - windows[w].lo); };
  const auto slice_of = [&](std::size_t w) { return half ? round16(len_of(w) / 2) : len_of(w); };
  std::vector<std::size_t> base;  // per window, where its slices start in gathered_
  std::size_t gathered_bytes = 0;
  for (std::size_t w = 0; w < windows.size(); ++w) {
    base.push_back(gathered_bytes);
    gathered_bytes += n * slice_of(w);
  }
  gathered_ = Buffer(device, std::max<std::size_t>(gathered_bytes, 16));

  int buckets = 0;
  for (const Segment& s : towers[0]) buckets = std::max(buckets, s.bucket + 1);
  bucket_spans_.assign(static_cast<std::size_t>(buckets), {0, 0});
  for (const Window& w : windows) {
    auto& span = bucket_spans_[static_cast<std::size_t>(w.bucket)];
    if (span.first == span.second) span.first = w.lo;
    span.first = std::min(span.first, w.lo);
    span.second = std::max(span.second, round16(w.hi));
  }
  sums_.reserve(static_cast<std::size_t>(buckets));
  sums_into_.reserve(static_cast<std::size_t>(buckets));
  for (int b = 0; b < buckets; ++b) {
    sums_.emplace_back(device);
    sums_into_.emplace_back(device);
  }
  const std::uint32_t type = exchange_ == DType::F16 ? 1u : 2u;
  const Kernel& kernel =
      half ? device.kernel({.shader = "add_n_half",
                            .local_size = {256, 1, 1},
                            .constants = {SpecConstant::u32(1, type), SpecConstant::u32(2, 0)}})
           : device.kernel({.shader = "add_n", .local_size = {256, 1, 1}});
  const Kernel& into =
      half ? device.kernel({.shader = "add_n_half",
                            .local_size = {256, 1, 1},
                            .constants = {SpecConstant::u32(1, type), SpecConstant::u32(2, 1)}})
           : device.kernel({.shader = "add_n_into", .local_size = {256, 1, 1}});
  for (std::size_t w = 0; w < windows.size(); ++w) {
    const std::size_t len = len_of(w);
    // The stride between slices: vec4s of f32, or uvec2s of 4 halves.
    struct {
      std::uint32_t vectors, towers, stride;
    } push{static_cast<std::uint32_t>(len / 16), static_cast<std::uint32_t>(n),
           static_cast<std::uint32_t>(slice_of(w) / (half ? 8 : 16))};
    const auto b = static_cast<std::size_t>(windows[w].bucket);
    const std::vector<BufferRange> bindings{
        BufferRange(gathered_, base[w], n * slice_of(w)),
        BufferRange(*destination_.buffer, destination_.offset + windows[w].lo, len)};
    const auto bytes = std::as_bytes(std::span(&push, 1));
    sums_[b].dispatch(kernel, bindings, bytes, Stream::linear_groups(kernel, push.vectors));
    sums_into_[b].dispatch(into, bindings, bytes, Stream::linear_groups(into, push.vectors));
  }

  // Each tower's pieces, merged into one copy where they are contiguous on both
  // sides (a tower's whole bucket is usually one copy); when half, only within
  // a window (slices shrink to half their f32 stretch, rounded up to 16 bytes).
  struct Run {
    int bucket;
    const Buffer* buffer;
    std::size_t src, window, rel, bytes;  // rel: in the window's f32 stretch
  };
  // The copies and packs hold pointers to packed_'s buffers: no reallocation.
  if (half) packed_.reserve(n), packs_.reserve(n);
  for (std::size_t t = 0; t < n; ++t) {
    std::vector<Run> runs;
    for (std::size_t w = 0; w < windows.size(); ++w) {
      for (const Window::Piece& p : windows[w].pieces) {
        const Segment& s = towers[t][p.segment];
        const std::size_t src = s.source.offset + p.skip;
        const std::size_t rel = s.offset + p.skip - windows[w].lo;
        const bool follows =
            !runs.empty() && runs.back().bucket == windows[w].bucket &&
            runs.back().buffer == s.source.buffer && runs.back().src + runs.back().bytes == src &&
            (runs.back().window == w
                 ? runs.back().rel + runs.back().bytes == rel
                 : !half && base[runs.back().window] + t * len_of(runs.back().window) +
                                    runs.back().rel + runs.back().bytes ==
                                base[w] + t * len_of(w) + rel);
        if (follows) {
          runs.back().bytes += p.bytes;
        } else {
          runs.push_back({windows[w].bucket, s.source.buffer, src, w, rel, p.bytes});
        }
      }
    }
    copies_.emplace_back();
    if (!half) {
      for (const Run& r : runs) {
        const std::size_t dst = base[r.window] + t * len_of(r.window) + r.rel;
        copies_.back().push_back(
            {r.bucket, std::make_unique<CrossDeviceCopy>(BufferRange(*r.buffer, r.src, r.bytes),
                                                         BufferRange(gathered_, dst, r.bytes))});
      }
      continue;
    }
    // Half: each run packed on the tower's Device into packed_[t] (offsets at
    // its binding alignment), then copied: its f32 values' halves, whole words.
    Device& tower = runs.empty() ? device : runs.front().buffer->device();
    const std::size_t align =
        std::max<std::size_t>(16, tower.limits().minStorageBufferOffsetAlignment);
    const auto align_up = [](std::size_t x, std::size_t a) { return (x + a - 1) / a * a; };
    std::vector<std::size_t> at;
    std::size_t total = 0;
    for (const Run& r : runs) {
      at.push_back(total);
      total = align_up(total + packed_bytes(r.bytes / 4), align);
    }
    packed_.emplace_back(tower, std::max<std::size_t>(total, 16));
    packs_.emplace_back();
    for (int b = 0; b < buckets; ++b) packs_.back().emplace_back(tower);
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const Run& r = runs[i];
      const std::size_t words = packed_bytes(r.bytes / 4) / 4;
      record_pack_half(packs_.back()[static_cast<std::size_t>(r.bucket)],
                       BufferRange(*r.buffer, r.src, r.bytes),
                       BufferRange(packed_.back(), at[i], words * 4), exchange_);
      const std::size_t dst = base[r.window] + t * slice_of(r.window) + r.rel / 2;
      copies_.back().push_back({r.bucket, std::make_unique<CrossDeviceCopy>(
                                              BufferRange(packed_.back(), at[i], words * 4),
                                              BufferRange(gathered_, dst, words * 4))});
    }
  }
  arrived_.assign(static_cast<std::size_t>(buckets), 0);
  arrivals_.resize(static_cast<std::size_t>(buckets));
  for (auto& a : arrivals_) a.reserve(copies_.front().size() * n);
}

void GradientReducer::arrive(std::size_t tower, int bucket, const Ticket& ready) {
  if (tower >= copies_.size() || bucket < 0) {
    throw Error(fmt::format("GradientReducer::arrive: tower {} of {}, bucket {}", tower,
                            copies_.size(), bucket));
  }
  if (bucket >= buckets()) return;  // none of this reducer's segments travel in it
  const auto b = static_cast<std::size_t>(bucket);
  // A half exchange packs the bucket on the tower's Device first.
  Ticket packed = ready;
  if (!packs_.empty() && packs_[tower][b].command_count() != 0) {
    packed = packs_[tower][b].submit({&ready, 1});
  }
  for (const Copy& c : copies_[tower]) {
    if (c.bucket != bucket) continue;
    const Ticket copied = c.copy->start({&packed, 1})[0];
    std::lock_guard lock(mutex_);
    arrivals_[b].push_back(copied);
  }
  Ticket summed;
  {
    std::lock_guard lock(mutex_);
    if (++arrived_[b] < copies_.size() || sums_[b].command_count() == 0) return;
    summed = (accumulate_ ? sums_into_ : sums_)[b].submit(arrivals_[b]);
    if (summed.value > last_sum_.value) last_sum_ = summed;
  }
  if (on_summed_) on_summed_(bucket, summed);
}

BufferRange GradientReducer::bucket_range(int bucket) const {
  const auto& [lo, hi] = bucket_spans_.at(static_cast<std::size_t>(bucket));
  return BufferRange(*destination_.buffer, destination_.offset + lo, hi - lo);
}

Ticket GradientReducer::finish() {
  std::lock_guard lock(mutex_);
  for (std::size_t b = 0; b < arrived_.size(); ++b) {
    if (arrived_[b] != copies_.size()) {
      throw Error(fmt::format("GradientReducer::finish: bucket {} came from {} of {} towers", b,
                              arrived_[b], copies_.size()));
    }
    arrived_[b] = 0;
    arrivals_[b].clear();
  }
  return std::exchange(last_sum_, Ticket{});
}

void GradientReducer::set_accumulate(bool accumulate) {
  std::lock_guard lock(mutex_);
  for (std::size_t b = 0; b < arrived_.size(); ++b) {
    if (arrived_[b] != 0) {
      throw Error(fmt::format(
          "GradientReducer::set_accumulate: bucket {} is part-way through a step ({} of {} "
          "towers); change the mode between steps",
          b, arrived_[b], copies_.size()));
    }
  }
  accumulate_ = accumulate;
}

void GradientReducer::abandon() {
  std::lock_guard lock(mutex_);
  for (std::size_t b = 0; b < arrived_.size(); ++b) {
    for (const Ticket& t : arrivals_[b]) t.wait();
    arrived_[b] = 0;
    arrivals_[b].clear();
  }
  last_sum_.wait();
  last_sum_ = Ticket{};
}

Ticket GradientReducer::run(std::span<const Ticket> ready) {
  if (!ready.empty() && ready.size() != copies_.size()) {
    throw Error(fmt::format("GradientReducer::run: {} tickets for {} towers", ready.size(),
                            copies_.size()));
  }
  for (std::size_t t = 0; t < copies_.size(); ++t) {
    for (int b = 0; b < buckets(); ++b) arrive(t, b, ready.empty() ? Ticket{} : ready[t]);
  }
  return finish();
}

std::uint64_t GradientReducer::host_waits() const {
  std::uint64_t waits = 0;
  for (const auto& tower : copies_) {
    for (const Copy& c : tower) waits += c.copy->host_waits();
  }
  return waits;
}

}  // namespace vkt
