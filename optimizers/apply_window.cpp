#include "apply_window.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "../runtime/vulkan/error.h"

namespace vkt::detail {
namespace {

std::uint64_t down(std::uint64_t v, std::uint64_t a) {
  return v / a * a;
}
std::uint64_t up(std::uint64_t v, std::uint64_t a) {
  return (v + a - 1) / a * a;
}

/// The dispatch being filled: per binding, the lowest and highest byte touched.
struct Open {
  bool empty = true;
  WindowPart part;
  std::vector<std::uint64_t> lo, hi;
};

/// How many units of `seg` from `u` the open dispatch can take, every window
/// staying within the limit.
std::uint64_t fit(const Open& open, const WindowSegment& seg, std::uint64_t u, std::uint64_t limit,
                  std::uint64_t alignment) {
  std::uint64_t n = seg.units - u;
  for (std::size_t b = 0; b < seg.bindings.size(); ++b) {
    const WindowBinding& w = seg.bindings[b];
    const std::uint64_t start = w.offset + u * w.stride;
    const std::uint64_t lo = open.empty ? start : std::min(open.lo[b], start);
    const std::uint64_t base = down(lo, alignment);
    const std::uint64_t cap = down(base + limit, 16);
    if (!open.empty && open.hi[b] > cap) return 0;
    if (w.stride == 0) {
      if (up(w.offset + w.fixed, 16) > cap) return 0;
      continue;
    }
    n = std::min(n, start > cap ? 0 : (cap - start) / w.stride);
  }
  return n;
}

void add(Open& open, std::uint32_t s, const WindowSegment& seg, std::uint64_t u, std::uint64_t n) {
  if (open.empty) {
    open.part.first_segment = s;
    open.part.first_unit = u;
    open.lo.assign(seg.bindings.size(), std::numeric_limits<std::uint64_t>::max());
    open.hi.assign(seg.bindings.size(), 0);
    open.empty = false;
  }
  open.part.end_segment = s + 1;
  open.part.end_unit = u + n;
  for (std::size_t b = 0; b < seg.bindings.size(); ++b) {
    const WindowBinding& w = seg.bindings[b];
    const std::uint64_t start = w.offset + u * w.stride;
    const std::uint64_t end = w.stride == 0 ? w.offset + w.fixed : start + n * w.stride;
    open.lo[b] = std::min(open.lo[b], start);
    open.hi[b] = std::max(open.hi[b], up(end, 16));
  }
}

void close(Open& open, std::vector<WindowPart>& parts, std::uint64_t alignment) {
  if (open.empty) return;
  for (std::size_t b = 0; b < open.lo.size(); ++b) {
    const std::uint64_t base = down(open.lo[b], alignment);
    // At least one vec4, for a binding of nothing (an empty sparse gradient).
    open.part.windows.push_back({base, std::max<std::uint64_t>(open.hi[b] - base, 16)});
  }
  parts.push_back(std::move(open.part));
  open = Open{};
}

}  // namespace

std::vector<WindowPart> plan_windows(const std::vector<WindowSegment>& segments,
                                     std::uint64_t limit, std::uint64_t alignment,
                                     const std::string& what) {
  std::vector<WindowPart> parts;
  Open open;
  for (std::size_t s = 0; s < segments.size(); ++s) {
    const WindowSegment& seg = segments[s];
    if (seg.units == 0) continue;  // nothing to bind; the shader skips it too
    std::uint64_t u = 0;
    do {
      const std::uint64_t n = fit(open, seg, u, limit, alignment);
      if (n == 0 && open.empty) {
        throw Error(
            fmt::format("{}: '{}' does not fit the device's max storage buffer range of {} "
                        "bytes (one of its rows, or its sparse gradient, is wider); use a "
                        "device with a larger limit or a smaller tensor",
                        what, seg.name, limit));
      }
      if (n == 0 && !open.empty) {
        close(open, parts, alignment);
        continue;
      }
      add(open, static_cast<std::uint32_t>(s), seg, u, n);
      u += n;
      if (u < seg.units) close(open, parts, alignment);
    } while (u < seg.units);
  }
  close(open, parts, alignment);
  return parts;
}

}  // namespace vkt::detail
