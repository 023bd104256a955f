#pragma once
// Shared helpers for the runtime tests.

#include <catch2/catch.hpp>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <vktower/runtime/vulkan/error.h>

namespace vkt::test {

inline std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

/// Runs `fn`, requires it to throw vkt::Error, and returns the message.
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const vkt::Error& e) {
    return e.what();
  }
  FAIL("expected a vkt::Error, none was thrown");
  return {};
}

}  // namespace vkt::test
