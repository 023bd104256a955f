#include "matmul_coopmat.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <random>

#include "../../vulkan/detail/log.h"
#include "../../vulkan/device.h"
#include "../../vulkan/stream.h"
#include "../half.h"
#include "matmul_tiles.h"

namespace vkt {
namespace {

struct Push {
  std::uint32_t m, n, k;
};

const Kernel& coopmat_kernel(Device& device, const CooperativeTile& tile, bool ta, bool tb) {
  std::vector<SpecConstant> constants = tile.constants();
  constants.push_back(SpecConstant::u32(1, ta ? 1u : 0u));
  constants.push_back(SpecConstant::u32(2, tb ? 1u : 0u));
  return device.kernel({.shader = "matmul_coopmat",
                        .local_size = {tile.invocations(device.info().subgroup_size), 1, 1},
                        .constants = constants});
}

Groups coopmat_groups(const CooperativeTile& tile, std::uint32_t m, std::uint32_t n,
                      std::uint32_t batch) {
  return {(n + tile.bn() - 1) / tile.bn(), (m + tile.bm() - 1) / tile.bm(), batch};
}

std::vector<std::uint16_t> random_f16(std::size_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<std::uint16_t> v(count);
  for (std::uint16_t& h : v) h = f32_to_f16(dist(rng));
  return v;
}

/// Seconds of `dispatches` products C[n,n] = A[n,n] B[n,n] with `tile`, the
/// fastest of 3 runs after a warm-up; device timestamps where the device has
/// them, else wall time.
double time_tile(Device& device, const CooperativeTile& tile, const Buffer& a, const Buffer& b,
                 const Buffer& c, std::uint32_t n, int dispatches) {
  const Kernel& kernel = coopmat_kernel(device, tile, false, false);
  const bool stamps = device.info().timestamps;
  Stream stream(device);
  const std::size_t t0 = stamps ? stream.timestamp() : 0;
  for (int i = 0; i < dispatches; ++i) {
    stream.dispatch(kernel, {a, b, c}, Push{n, n, n}, coopmat_groups(tile, n, n, 1));
  }
  const std::size_t t1 = stamps ? stream.timestamp() : 0;
  return fastest_run_seconds(stream, stamps, t0, t1, 3);
}

/// Every transpose, a batch of 2, sizes no tile divides.
bool passes_check(Device& device, const CooperativeTile& tile) {
  for (int t = 0; t < 4; ++t) {
    const std::int64_t wrong = check_cooperative_tile(device, tile, 67, 45, 83, 2, t & 1, t & 2);
    if (wrong != 0) {
      detail::log().warn(
          "the cooperative-matrix matmul with tile {} gave {} wrong elements of 2 x 67 x 45 "
          "(transposes {}) on {}; that tile is not used",
          tile.str(), wrong, t, device.info().name);
      return false;
    }
  }
  return true;
}

/// Checks every candidate, times the ones that pass at 2048^3 (smaller on a
/// slow device), stores the fastest, or the failure, in the TuningCache.
std::optional<CooperativeTile> tune_cooperative_tile(Device& device) {
  const std::vector<CooperativeTile> candidates = cooperative_candidates(device.info());
  if (candidates.empty()) return std::nullopt;  // e.g. no subgroup operations: none to try
  std::uint32_t size = 2048;
  while (std::uint64_t{size} * size * 2 > device.max_storage_buffer_range() && size > 256)
    size /= 2;
  const std::size_t bytes = std::size_t{size} * size * 2;
  Buffer a(device, bytes), b(device, bytes), c(device, bytes);
  a.upload(random_f16(std::size_t{size} * size, 1));
  b.upload(random_f16(std::size_t{size} * size, 2));
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::optional<CooperativeTile> best;
  double best_seconds = std::numeric_limits<double>::infinity();
  for (const CooperativeTile& tile : candidates) {
    if (best && elapsed() > 3.0)
      break;  // the best so far: the first candidates are the likely ones
    if (!passes_check(device, tile)) continue;
    const double t = time_tile(device, tile, a, b, c, size, 2);
    if (t < best_seconds) best_seconds = t, best = tile;
  }
  if (!best) {
    device.tuning().store(kCooperativeTileKey, {0});
    detail::log().warn(
        "no cooperative-matrix tile passed the check on {}: its f16 matmuls take the scalar "
        "half kernel",
        device.info().name);
    return std::nullopt;
  }
  device.tuning().store(kCooperativeTileKey, best->values());
  detail::log().info(
      "tuned the cooperative-matrix matmul on {}: {} ({:.0f} GFLOP/s at {}^3; {:.2f} s)",
      device.info().name, best->str(), 2.0 * size * size * double(size) * 2 / best_seconds / 1e9,
      size, elapsed());
  return best;
}

}  // namespace

std::vector<SpecConstant> CooperativeTile::constants() const {
  return {SpecConstant::u32(3, unit.m), SpecConstant::u32(4, unit.n), SpecConstant::u32(5, unit.k),
          SpecConstant::u32(6, wm),     SpecConstant::u32(7, wn),     SpecConstant::u32(8, tm),
          SpecConstant::u32(9, tn),     SpecConstant::u32(10, bk)};
}

std::string CooperativeTile::str() const {
  return fmt::format("{}x{}x{} of {}x{}x{} units, {}x{} subgroups of {}x{}", bm(), bn(), bk, unit.m,
                     unit.n, unit.k, wm, wn, tm, tn);
}

std::optional<CooperativeTile> CooperativeTile::from_values(const std::vector<std::uint32_t>& v) {
  if (v.size() != 8) return std::nullopt;
  return CooperativeTile{{v[0], v[1], v[2]}, v[3], v[4], v[5], v[6], v[7]};
}

bool cooperative_tile_fits(const DeviceInfo& info, const CooperativeTile& t) {
  const auto& units = info.cooperative_f16;
  if (std::find(units.begin(), units.end(), t.unit) == units.end() || info.subgroup_size == 0 ||
      !info.subgroup_compute_ops || t.unit.k == 0 || t.bk % t.unit.k != 0 || t.bk > 256 ||
      t.wm * t.wn == 0 || t.tm * t.tn == 0 || t.tm * t.tn > 64 || t.bm() > 1024 || t.bn() > 1024) {
    return false;
  }
  const std::uint32_t invocations = t.invocations(info.subgroup_size);
  return invocations <= info.max_workgroup_invocations &&
         invocations <= info.max_workgroup_size[0] &&
         t.shared_bytes() <= info.max_shared_memory_bytes;
}

std::vector<CooperativeTile> cooperative_candidates(const DeviceInfo& info) {
  std::vector<CooperativeShape> units = info.cooperative_f16;
  std::stable_sort(units.begin(), units.end(),
                   [](const CooperativeShape& x, const CooperativeShape& y) {
                     return x.m * x.n * x.k > y.m * y.n * y.k;
                   });
  // (wm, wn, tm, tn, bk in units of unit.k): the grids of llama.cpp-like
  // kernels on tensor cores, 64 to 256 wide for 16 x 8 units.
  struct Grid {
    std::uint32_t wm, wn, tm, tn, depth;
  };
  constexpr Grid grids[] = {
      {2, 2, 4, 8, 2}, {2, 2, 4, 4, 2}, {4, 2, 2, 8, 2}, {2, 4, 4, 4, 2}, {2, 2, 2, 4, 2},
      {2, 2, 4, 8, 1}, {2, 2, 4, 8, 4}, {2, 2, 4, 4, 4}, {4, 2, 4, 4, 2}, {2, 2, 2, 2, 2},
  };
  std::vector<CooperativeTile> out;
  for (const CooperativeShape& unit : units) {
    for (const Grid& g : grids) {
      const CooperativeTile tile{unit, g.wm, g.wn, g.tm, g.tn, g.depth * unit.k};
      if (cooperative_tile_fits(info, tile)) out.push_back(tile);
    }
  }
  return out;
}

std::optional<CooperativeTile> cooperative_tile(Device& device, DType dtype) {
  // Called at every half matmul's recording: the common answer first.
  if (dtype != DType::F16 || device.info().cooperative_f16.empty()) return std::nullopt;
  // One tuning run at a time in the process, as the tiled kernel's.
  static std::mutex tuning;
  const std::lock_guard lock(tuning);
  if (const auto values = device.tuning().find(kCooperativeTileKey)) {
    if (*values == std::vector<std::uint32_t>{0}) return std::nullopt;
    const auto tile = CooperativeTile::from_values(*values);
    if (tile && cooperative_tile_fits(device.info(), *tile)) return tile;
    detail::log().warn("tuning cache: '{}' holds values that are not a tile {} can run; ignored",
                       kCooperativeTileKey, device.info().name);
  }
  return tune_cooperative_tile(device);
}

void record_cooperative_matmul(Stream& stream, const CooperativeTile& tile, BufferRange a,
                               BufferRange b, BufferRange c, std::uint32_t m, std::uint32_t n,
                               std::uint32_t k, std::uint32_t batch, bool transpose_a,
                               bool transpose_b) {
  const Kernel& kernel = coopmat_kernel(stream.device(), tile, transpose_a, transpose_b);
  stream.dispatch(kernel, {a, b, c}, Push{m, n, k}, coopmat_groups(tile, m, n, batch));
}

std::int64_t check_cooperative_tile(Device& device, const CooperativeTile& tile, std::uint32_t m,
                                    std::uint32_t n, std::uint32_t k, std::uint32_t batch,
                                    bool transpose_a, bool transpose_b) {
  const std::size_t sa = std::size_t{m} * k, sb = std::size_t{k} * n, sc = std::size_t{m} * n;
  const std::vector<std::uint16_t> ha = random_f16(sa * batch, 3), hb = random_f16(sb * batch, 4);
  Buffer a(device, ha.size() * 2), b(device, hb.size() * 2), c(device, sc * batch * 2);
  a.upload(ha);
  b.upload(hb);
  {
    Stream stream(device);
    record_cooperative_matmul(stream, tile, a, b, c, m, n, k, batch, transpose_a, transpose_b);
    stream.run();
  }
  const std::vector<std::uint16_t> hc = c.download<std::uint16_t>();
  std::int64_t wrong = 0;
  for (std::uint32_t z = 0; z < batch; ++z) {
    for (std::uint32_t i = 0; i < m; ++i) {
      for (std::uint32_t j = 0; j < n; ++j) {
        double sum = 0, magnitude = 0;
        for (std::uint32_t p = 0; p < k; ++p) {
          const double x = f16_to_f32(ha[z * sa + (transpose_a ? p * m + i : i * k + p)]);
          const double y = f16_to_f32(hb[z * sb + (transpose_b ? j * k + p : p * n + j)]);
          sum += x * y;
          magnitude += std::abs(x * y);
        }
        // One rounding to f16, and f32 sums of exact products in any order.
        const double bound =
            std::ldexp(1.0, -11) * std::abs(sum) + k * std::ldexp(1.0, -24) * magnitude + 1e-7;
        const double got = f16_to_f32(hc[z * sc + i * n + j]);
        wrong += !(std::abs(got - sum) <= bound);
      }
    }
  }
  return wrong;
}

}  // namespace vkt
