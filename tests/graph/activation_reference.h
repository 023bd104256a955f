#pragma once
// layers::Activation in double precision: the reference the dense-layer tests
// (plain and fused) compare with.

#include <algorithm>
#include <cmath>

#include <vktower/runtime/graph/ops/layers.h>

namespace vkt::test {

inline double activation_reference(layers::Activation a, double z) {
  using layers::Activation;
  switch (a) {
    case Activation::Relu:
      return std::max(z, 0.0);
    case Activation::Sigmoid:
      return 1.0 / (1.0 + std::exp(-z));
    case Activation::Tanh:
      return std::tanh(z);
    case Activation::Gelu:
      return 0.5 * z * (1 + std::tanh(std::sqrt(2 / M_PI) * (z + 0.044715 * z * z * z)));
    case Activation::Elu:
      return z > 0 ? z : std::exp(z) - 1;
    case Activation::LeakyRelu:
      return z >= 0 ? z : 0.2 * z;
    case Activation::Softplus:
      return std::log1p(std::exp(z));
    default:
      return z;
  }
}

}  // namespace vkt::test
