// layers::layer_norm: vkt::layer_norm with the scale and offset it owns.
#include <fmt/format.h>

#include <cmath>

#include "../../vulkan/error.h"
#include "../frozen_scope.h"
#include "../graph.h"
#include "kernel_util.h"
#include "layer_norm.h"
#include "layers.h"

namespace vkt::layers {

Tensor layer_norm(const Tensor& x, float epsilon, const std::string& given_name) {
  const std::string name = layer_name(x, given_name, "layer_norm");
  if (!x.valid()) throw Error(fmt::format("layer_norm '{}': the input tensor is empty", name));
  if (x.shape().rank() == 0) {
    throw Error(fmt::format(
        "layer_norm '{}': input '{}' is a scalar; it needs a last dimension to normalize over",
        name, x.name()));
  }
  // Checked before the variables are made, so a failed call leaves none behind.
  if (x.dtype() != DType::F32) {
    throw Error(fmt::format("layer_norm '{}': input '{}' {} {}; it takes f32", name, x.name(),
                            x.shape().str(), ops_detail::not_f32(x)));
  }
  if (!std::isfinite(epsilon) || epsilon < 0.0f) {
    throw Error(fmt::format(
        "layer_norm '{}': epsilon is {}; it must be finite and at least 0 (1e-5 is usual)", name,
        epsilon));
  }
  const std::int64_t d = x.shape()[x.shape().rank() - 1];
  Graph& g = x.graph();
  // Ones and zeros: the layer starts as a plain normalization, as in Keras.
  const Tensor gamma = layer_weight(g.variable(name + "/gamma", {d}, Initializer::ones()));
  const Tensor beta = layer_weight(g.variable(name + "/beta", {d}, Initializer::zeros()));
  return vkt::layer_norm(x, gamma, beta, epsilon);
}

}  // namespace vkt::layers
