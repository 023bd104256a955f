#include "self_test.h"

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <random>
#include <vector>

SelfTestResult run_self_test(vkt::Device& device, std::uint32_t elements) {
  SelfTestResult result;
  try {
    std::mt19937 rng(2024);
    std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
    std::vector<float> x(elements), y(elements);
    for (float& v : x) v = dist(rng);
    for (float& v : y) v = dist(rng);
    const float a = 1.75f;

    vkt::Buffer bx(device, elements * sizeof(float));
    vkt::Buffer by(device, elements * sizeof(float));
    bx.upload(x);
    by.upload(y);
    const vkt::Kernel& saxpy = device.kernel({.shader = "saxpy", .local_size = {256, 1, 1}});
    vkt::Stream stream(device);
    struct {
      float a;
      std::uint32_t n;
    } params{a, elements};
    stream.dispatch(saxpy, {bx, by}, params, vkt::Stream::groups_for(saxpy, elements));
    const auto start = std::chrono::steady_clock::now();
    stream.run();
    result.device_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();

    const std::vector<float> out = by.download<float>();
    for (std::uint32_t i = 0; i < elements; ++i) {
      // Float rounding of a*x and of the sum (fused or not) bounds the error by
      // a few ulps of the operands' magnitude, not of the (possibly tiny) result.
      const double expected = static_cast<double>(a) * x[i] + y[i];
      const double scale = std::abs(static_cast<double>(a) * x[i]) + std::abs(y[i]);
      const double error = std::abs(out[i] - expected) / std::max(scale, 1e-30);
      result.max_error = std::max(result.max_error, error);
      if (!(error <= 2 * FLT_EPSILON)) ++result.wrong;  // NaN counts as wrong
    }
    result.passed = result.wrong == 0;
  } catch (const vkt::Error& e) {
    result.error = e.what();
  }
  return result;
}
