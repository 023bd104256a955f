#pragma once
// Tensors of rank up to 6 on kernels that index 4 dimensions: adjacent axes
// that a kernel would walk the same way merge into one, and axes of size 1
// drop, so a [B, T, 3, H, D] broadcast or pad costs the kernel nothing new.

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "../shape.h"

namespace vkt::ops_detail {

/// An elementwise broadcast over `out`, as 4 dims (right-aligned, padded with
/// 1 on the left) and each operand's row-major strides along them (0 where
/// the operand is broadcast).
struct BroadcastFold {
  std::array<std::uint32_t, 4> dims{1, 1, 1, 1};
  std::vector<std::array<std::uint32_t, 4>> strides;
};

/// `operands` broadcast to `out` (each operand's dims right-aligned, equal to
/// out's or 1), folded: adjacent axes merge where every operand either spans
/// both or is broadcast along both. Empty when more than 4 axes remain (a
/// pattern alternating across 5 or more axes).
std::optional<BroadcastFold> fold_broadcast(const Shape& out, std::span<const Shape> operands);

/// fold_broadcast, or a vkt::Error naming `what` and the shapes, saying how to
/// merge axes, when more than 4 remain.
BroadcastFold fold_broadcast_or_throw(const Shape& out, std::span<const Shape> operands,
                                      const std::string& what);

/// A pad (or its cut, with negative offsets) of `in` into `out` (same rank;
/// `offset` per axis, where in's element 0 lies in out), as 4 dims: an axis
/// that neither pads nor cuts merges into the axis on its left.
struct PadFold {
  std::array<std::uint32_t, 4> out_dims{1, 1, 1, 1}, in_dims{1, 1, 1, 1};
  std::array<std::int32_t, 4> offset{};
};

/// Empty when more than 4 axes remain (5 or more padded axes, the first
/// excepted).
std::optional<PadFold> fold_pad(const Shape& out, const Shape& in,
                                std::span<const std::int64_t> offset);

}  // namespace vkt::ops_detail
