#pragma once
// What the decoder tests share: a model's logits on the test device, and the
// comparison of logits against a double reference.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include <vktower/models/decoder.h>
#include <vktower/models/pretrained.h>
#include <vktower/runtime/graph/executor.h>
#include <vktower/runtime/graph/graph.h>

#include "../shared_device.h"

namespace vkt::test {

/// Logits [B, T, vocab] of `batch` (B sequences of T tokens, row-major) at
/// positions 0..T-1, computed on the shared device.
inline std::vector<float> device_logits(const models::DecoderConfig& config,
                                        const models::DecoderWeights& weights,
                                        const std::vector<std::int32_t>& batch, std::int64_t b,
                                        const models::DecoderOptions& options = {}) {
  const auto t = static_cast<std::int64_t>(batch.size()) / b;
  Graph g(shared_device());
  const Tensor tokens = g.input("tokens", {b, t}, DType::I32);
  std::vector<std::int32_t> steps(static_cast<std::size_t>(t));
  std::iota(steps.begin(), steps.end(), 0);
  const Tensor positions = g.constant_i32(Shape{t}, steps);
  const Tensor logits = models::decoder_logits(tokens, positions, config, weights, options);
  Executor exec(g, {logits}, {.training = false});
  exec.feed("tokens", batch);
  exec.run();
  return exec.read(logits);
}

/// The largest |got - want| / (1 + |want|).
inline double worst_error(const std::vector<float>& got, const std::vector<double>& want) {
  double worst = got.size() == want.size() ? 0.0 : INFINITY;
  for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    worst = std::max(worst,
                     std::abs(static_cast<double>(got[i]) - want[i]) / (1.0 + std::abs(want[i])));
  }
  return worst;
}

}  // namespace vkt::test
