#pragma once
// What the tests that compare trained models share: their variables read one
// after another, and the largest difference between two such lists.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include <vktower/tower/estimator.h>

namespace vkt::test {

/// The variables named in `names`, from the newest checkpoint (or, on a rank
/// other than 0, the trained model), concatenated in that order.
template <class Names>
std::vector<float> variables_of(const Estimator& estimator, const Names& names) {
  std::vector<float> all;
  for (const char* name : names) {
    const std::vector<float> v = estimator.variable_value(name).f32;
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

/// The largest |a[i] - b[i]|; a and b must be as long.
inline float worst_difference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  float worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

}  // namespace vkt::test
