#pragma once
// Splits the bindings of an update over arenas into windows that each fit the
// device's storage-buffer range (internal to optimizers/).

#include <cstdint>
#include <string>
#include <vector>

namespace vkt::detail {

/// Where one binding of a segment lies in its arena, in bytes: `stride` bytes
/// per unit from `offset` (a variable's vec4s or rows), or, with stride 0,
/// `fixed` bytes from `offset` whatever units a dispatch takes (a sparse
/// gradient's values and indices, which every row of it may read).
struct WindowBinding {
  std::uint64_t offset = 0;
  std::uint64_t stride = 0;
  std::uint64_t fixed = 0;
};

/// One segment of an update (a variable): its units and, per binding (the same
/// count for every segment), where it lies. `name` is for messages.
struct WindowSegment {
  std::uint64_t units = 0;
  std::vector<WindowBinding> bindings;
  std::string name;
};

/// A range of an arena bound to one binding.
struct Window {
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
};

/// What one dispatch covers: segments [first_segment, end_segment), the first
/// from unit first_unit, the last up to end_unit, the others whole; and the
/// window of each binding.
struct WindowPart {
  std::uint32_t first_segment = 0;
  std::uint32_t end_segment = 0;
  std::uint64_t first_unit = 0;
  std::uint64_t end_unit = 0;
  std::vector<Window> windows;
};

/// Groups the segments, in order, into as few dispatches as keep every window
/// within `limit` bytes, splitting a segment's units where one does not fit.
/// Windows start at multiples of `alignment` (a power of two, at least 16) and
/// end at multiples of 16 (vec4 loads reach a tensor's padding). Throws
/// vkt::Error naming `what` and the segment when one unit, or a fixed range,
/// is wider than the limit allows.
std::vector<WindowPart> plan_windows(const std::vector<WindowSegment>& segments,
                                     std::uint64_t limit, std::uint64_t alignment,
                                     const std::string& what);

}  // namespace vkt::detail
