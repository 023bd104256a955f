#pragma once
// The tiled (GPU) matmul kernel timed at each candidate tile shape that a
// tuning run tries (vkt::tiled_candidates), with the figures printed
// (vkt-bench-matmul --sweep-tiles). Each shape's
// result is checked against a double-precision product on sampled elements,
// so a shape that computes wrong numbers is reported, not ranked.

#include <fmt/format.h>

#include <vktower/runtime/graph/ops/matmul_tiles.h>
#include <vktower/vktower.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace vkt::bench {

struct TiledSweepResult {
  TiledShape shape;
  double gflops = 0;
  double max_rel_error = 0;
};

/// Square operands on the host and on the device.
struct SquareOperands {
  SquareOperands(Device& device, std::uint32_t size)
      : n(size),
        ha(std::size_t(n) * n),
        hb(ha.size()),
        a(device, ha.size() * 4),
        b(device, ha.size() * 4),
        c(device, ha.size() * 4) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float& x : ha) x = dist(rng);
    for (float& x : hb) x = dist(rng);
    a.upload(ha);
    b.upload(hb);
  }
  std::uint32_t n;
  std::vector<float> ha, hb;
  Buffer a, b, c;
};

/// GFLOP/s of C[n,n] = A[n,n] * B[n,n] with `shape` (time_tiled_shape: the
/// fastest of `reps` timings of `batch` back-to-back dispatches), and the
/// result's largest error on sampled elements.
inline TiledSweepResult time_tiled_shape(Device& device, const TiledShape& shape,
                                         SquareOperands& op, int reps, int batch) {
  const std::uint32_t n = op.n;
  const std::vector<float>& ha = op.ha;
  const std::vector<float>& hb = op.hb;
  std::mt19937 rng(11);
  const double seconds = vkt::time_tiled_shape(device, shape, op.a, op.b, op.c, n, batch, reps);
  TiledSweepResult result{shape, 2.0 * n * n * double(n) * batch / seconds / 1e9, 0};
  // Sampled elements against a double-precision dot product.
  const std::vector<float> hc = op.c.download<float>();
  std::uniform_int_distribution<std::uint32_t> pick(0, n - 1);
  for (int s = 0; s < 64; ++s) {
    const std::uint32_t i = s == 0 ? n - 1 : pick(rng), j = s == 0 ? n - 1 : pick(rng);
    double ref = 0, mag = 0;
    for (std::uint32_t k = 0; k < n; ++k) {
      ref += double(ha[i * n + k]) * hb[k * n + j];
      mag += std::abs(double(ha[i * n + k]) * hb[k * n + j]);
    }
    result.max_rel_error =
        std::max(result.max_rel_error, std::abs(hc[std::size_t(i) * n + j] - ref) / (mag + 1e-30));
  }
  return result;
}

/// Times every candidate that fits `device` at each size, prints a line per
/// shape and the best one per size (with `roof` GFLOP/s, also
/// `matmul_N_kernel_fraction_of_peak`: the kernel alone, dispatched directly);
/// returns the best at the last size.
inline TiledShape sweep_tiled_shapes(Device& device, const std::vector<int>& sizes, int reps,
                                     double roof = 0) {
  TiledShape best_shape = default_tiled_shape(device);
  for (int size : sizes) {
    const auto n = static_cast<std::uint32_t>(size);
    const int batch = std::clamp(int(4096.0 * 4096 * 4096 / (double(n) * n * n)), 1, 64);
    SquareOperands operands(device, n);
    fmt::print("\n  tiled shapes at {}^3 ({} dispatches per timing, {}):\n", n, batch,
               device.info().timestamps ? "device timestamps" : "wall clock");
    double best = 0;
    for (const TiledShape& shape : tiled_candidates()) {
      if (!tiled_shape_fits(device, shape)) continue;
      const TiledSweepResult r = time_tiled_shape(device, shape, operands, reps, batch);
      const bool ok = r.max_rel_error < 1e-4;
      fmt::print("    {:<34}{:>10.1f} GF/s  max rel error {:.1e}{}\n", shape.str(), r.gflops,
                 r.max_rel_error, ok ? "" : "  WRONG");
      if (ok && r.gflops > best) best = r.gflops, best_shape = shape;
    }
    fmt::print("  best at {}^3: {} {:.1f} GF/s\n", n, best_shape.str(), best);
    fmt::print("tiled_best_{}={} gflops={:.1f}\n", n, best_shape.str(), best);
    if (roof > 0) fmt::print("matmul_{}_kernel_fraction_of_peak={:.3f}\n", n, best / roof);
  }
  return best_shape;
}

}  // namespace vkt::bench
