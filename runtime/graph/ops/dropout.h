#pragma once
// Dropout with a mask drawn from a counter-based hash: reproducible, not stored.

#include <cstdint>

#include "../tensor.h"

namespace vkt {

/// In a training Executor: each element of x is kept with probability 1 - rate
/// and scaled by 1 / (1 - rate), else set to 0. In an evaluation Executor
/// (ExecutorOptions::training = false): x unchanged (copied).
///
/// The mask is a hash of (the graph's seed, the Executor's step, which is the
/// global step in training (Executor::step), this op's position in the graph
/// mixed with `seed_offset`, the element's row of the global batch (dimension 0
/// of x plus GraphOptions::first_row) and its place in that row): the same seed
/// and step give the same mask on every device and run, a resumed run
/// included; each step draws a new one; two dropout ops of one graph draw
/// different ones; and an example draws the same mask on 1 tower, N towers or
/// P processes, so how the batch is split never changes what is trained. The
/// gradient recomputes the mask from the same values instead of storing it.
/// rate must lie in [0, 1), else a vkt::Error.
///
///   vkt::Tensor h = vkt::dropout(vkt::relu(vkt::matmul(x, w)), 0.5f);
Tensor dropout(const Tensor& x, float rate, std::uint32_t seed_offset = 0);

}  // namespace vkt
