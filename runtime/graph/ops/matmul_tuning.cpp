// tune_tiled_shape (matmul_tiles.h): the tiled matmul kernel timed at each
// candidate tile shape on the device itself.
#include <algorithm>
#include <chrono>
#include <limits>
#include <mutex>

#include "../../vulkan/buffer.h"
#include "../../vulkan/detail/log.h"
#include "../../vulkan/device.h"
#include "../../vulkan/stream.h"
#include "matmul_tiles.h"

namespace vkt {
namespace {

struct Push {
  std::uint32_t m, n, k;
};

}  // namespace

double time_tiled_shape(Device& device, const TiledShape& shape, const Buffer& a, const Buffer& b,
                        const Buffer& c, std::uint32_t n, int dispatches, int reps) {
  std::vector<SpecConstant> constants = shape.constants();
  constants.push_back(SpecConstant::u32(7, 0));
  constants.push_back(SpecConstant::u32(8, 0));
  const Kernel& kernel = device.kernel({.shader = tiled_matmul_shader(n, n, n),
                                        .local_size = shape.local_size(),
                                        .constants = constants});
  const Groups groups = shape.groups(n, n);
  const bool stamps = device.info().timestamps;
  Stream stream(device);
  const std::size_t t0 = stamps ? stream.timestamp() : 0;
  for (int i = 0; i < dispatches; ++i) stream.dispatch(kernel, {a, b, c}, Push{n, n, n}, groups);
  const std::size_t t1 = stamps ? stream.timestamp() : 0;
  return fastest_run_seconds(stream, stamps, t0, t1, reps);
}

double fastest_run_seconds(Stream& stream, bool stamps, std::size_t t0, std::size_t t1, int reps) {
  stream.run();  // warm-up
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    stream.run();
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::min(best, stamps ? stream.elapsed_ns(t0, t1) * 1e-9 : wall);
  }
  return best;
}

TiledShape tune_tiled_shape(Device& device, std::uint32_t size) {
  // One tuning run at a time in the process: towers on one GPU would
  // otherwise time each other's work. The first to finish stores the shape;
  // the others then find it.
  static std::mutex tuning;
  const std::lock_guard lock(tuning);
  if (const auto stored = stored_tiled_shape(device)) return *stored;
  // Each operand is bound whole: on a device whose bindings are smaller
  // (maxStorageBufferRange, or DeviceOptions narrowing it) tune on a smaller
  // product, and below 256^3, which times nothing useful, not at all.
  while (std::uint64_t{size} * size * sizeof(float) > device.max_storage_buffer_range() &&
         size > 256) {
    size /= 2;
  }
  if (std::uint64_t{size} * size * sizeof(float) > device.max_storage_buffer_range()) {
    return default_tiled_shape(device);
  }
  const std::size_t bytes = std::size_t{size} * size * sizeof(float);
  Buffer a(device, bytes), b(device, bytes), c(device, bytes);
  // Zeros cost the same arithmetic as any other values.
  {
    Stream fill(device);
    fill.fill(a, 0);
    fill.fill(b, 0);
    fill.run();
  }
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  TiledShape best = default_tiled_shape(device);
  // A slow device (an integrated GPU, a software one) tunes on a smaller
  // product: one that the default shape computes in about 20 ms at most.
  double seconds = time_tiled_shape(device, best, a, b, c, size, 1);
  while (seconds > 0.02 && size > 256) size /= 2, seconds /= 8;
  double best_seconds = std::numeric_limits<double>::infinity();
  for (const TiledShape& shape : tiled_candidates()) {
    if (!tiled_shape_fits(device, shape)) continue;
    // Past the budget, the best so far: the first candidates are the likely ones.
    if (elapsed() > 3.0) break;
    const double t = time_tiled_shape(device, shape, a, b, c, size, 2);
    if (t < best_seconds) best_seconds = t, best = shape;
  }
  device.tuning().store(kTiledShapeKey, best.values());
  detail::log().info("tuned the tiled matmul on {}: {} ({:.0f} GFLOP/s at {}^3; {:.2f} s)",
                     device.info().name, best.str(),
                     2.0 * size * size * double(size) * 2 / best_seconds / 1e9, size, elapsed());
  return best;
}

}  // namespace vkt
