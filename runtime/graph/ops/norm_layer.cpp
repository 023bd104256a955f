// layers::layer_norm and layers::rms_norm: vkt::layer_norm and vkt::rms_norm
// with the scale (and offset) they own.
#include <fmt/format.h>

#include <cmath>

#include "../../vulkan/error.h"
#include "../frozen_scope.h"
#include "../graph.h"
#include "kernel_util.h"
#include "layer_norm.h"
#include "layers.h"
#include "rms_norm.h"

namespace vkt::layers {

namespace {

/// Checks a normalization layer's input and epsilon before its variables are
/// made, so a failed call leaves none behind; `kind` names the layer.
void check_norm_layer(const Tensor& x, float epsilon, const char* kind, const std::string& name) {
  if (!x.valid()) throw Error(fmt::format("{} '{}': the input tensor is empty", kind, name));
  if (x.shape().rank() == 0) {
    throw Error(
        fmt::format("{} '{}': input '{}' is a scalar; it needs a last dimension to normalize over",
                    kind, name, x.name()));
  }
  if (x.dtype() != DType::F32) {
    throw Error(fmt::format("{} '{}': input '{}' {} {}; it takes f32", kind, name, x.name(),
                            x.shape().str(), ops_detail::not_f32(x)));
  }
  if (!std::isfinite(epsilon) || epsilon < 0.0f) {
    throw Error(fmt::format("{} '{}': epsilon is {}; it must be finite and at least 0", kind, name,
                            epsilon));
  }
}

}  // namespace

Tensor layer_norm(const Tensor& x, float epsilon, const std::string& given_name) {
  const std::string name = layer_name(x, given_name, "layer_norm");
  check_norm_layer(x, epsilon, "layer_norm", name);
  const std::int64_t d = x.shape()[x.shape().rank() - 1];
  Graph& g = x.graph();
  // Ones and zeros: the layer starts as a plain normalization, as in Keras.
  const Tensor gamma = layer_weight(g.variable(name + "/gamma", {d}, Initializer::ones()));
  const Tensor beta = layer_weight(g.variable(name + "/beta", {d}, Initializer::zeros()));
  return vkt::layer_norm(x, gamma, beta, epsilon);
}

Tensor rms_norm(const Tensor& x, float epsilon, const std::string& given_name) {
  const std::string name = layer_name(x, given_name, "rms_norm");
  check_norm_layer(x, epsilon, "rms_norm", name);
  const std::int64_t d = x.shape()[x.shape().rank() - 1];
  // Ones, as Hugging Face's LlamaRMSNorm starts.
  const Tensor gamma = layer_weight(x.graph().variable(name + "/gamma", {d}, Initializer::ones()));
  return vkt::rms_norm(x, gamma, epsilon);
}

}  // namespace vkt::layers
