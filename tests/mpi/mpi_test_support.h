#pragma once
// What the MPI tests share: inputs every rank can regenerate for any rank, and
// bit-for-bit comparison.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <span>
#include <vector>

namespace vkt::test {

/// Rank `rank`'s values for a case: signs and magnitudes (2^-12 to 2^12) mixed,
/// so that the order of the additions shows in the rounding.
template <typename T>
std::vector<T> rank_values(int rank, std::size_t n, unsigned seed) {
  std::mt19937 rng(seed * 1000u + static_cast<unsigned>(rank));
  std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-12, 12);
  std::vector<T> values(n);
  for (T& v : values) v = static_cast<T>(std::ldexp(mantissa(rng), exponent(rng)));
  return values;
}

/// ((x_0 + x_1) + x_2) + ... elementwise, in T.
template <typename T>
std::vector<T> rank_order_sum(int ranks, std::size_t n, unsigned seed) {
  std::vector<T> sum = rank_values<T>(0, n, seed);
  for (int r = 1; r < ranks; ++r) {
    const std::vector<T> next = rank_values<T>(r, n, seed);
    for (std::size_t i = 0; i < n; ++i) sum[i] += next[i];
  }
  return sum;
}

/// The first index where the bits of `a` and `b` differ, or a.size() when none.
template <typename T>
std::size_t first_bit_difference(std::span<const T> a, std::span<const T> b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return i;
  }
  return a.size();
}

}  // namespace vkt::test
