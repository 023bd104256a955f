// layers::dense and the activations layers apply.
#include "layers.h"

#include <fmt/format.h>

#include "../../vulkan/error.h"
#include "../frozen_scope.h"
#include "../graph.h"
#include "cast.h"
#include "dense_fused.h"
#include "elementwise.h"
#include "matmul.h"
#include "shape_ops.h"

namespace vkt::layers {

Tensor activate(const Tensor& x, Activation activation) {
  switch (activation) {
    case Activation::None:
      return x;
    case Activation::Relu:
      return relu(x);
    case Activation::Sigmoid:
      return sigmoid(x);
    case Activation::Tanh:
      return tanh(x);
    case Activation::Gelu:
      return gelu(x);
    case Activation::Elu:
      return elu(x);
    case Activation::LeakyRelu:
      return leaky_relu(x);
    case Activation::Softplus:
      return softplus(x);
  }
  throw Error(fmt::format("activate: unknown activation {}", static_cast<int>(activation)));
}

namespace {

/// Whether the activation's gradient reads its input (rather than its output).
bool reads_its_input(Activation activation) {
  switch (activation) {
    case Activation::Gelu:
    case Activation::Elu:
    case Activation::LeakyRelu:
    case Activation::Softplus:
      return true;
    default:
      return false;
  }
}

}  // namespace

std::string layer_name(const Tensor& x, const std::string& name, const char* base) {
  if (!name.empty()) return name;
  return x.valid() ? x.graph().unique_layer_name(base) : std::string(base);
}

Tensor dense(const Tensor& x, std::int64_t units, Activation activation,
             const std::string& given_name) {
  const std::string name = layer_name(x, given_name, "dense");
  if (!x.valid()) throw Error(fmt::format("dense '{}': the input tensor is empty", name));
  const Shape shape = x.shape();  // a copy: new nodes may move the graph's shapes
  if (shape.rank() < 2) {
    throw Error(
        fmt::format("dense '{}': input '{}' has shape {}; it needs a batch dimension "
                    "and a feature dimension ([batch, features])",
                    name, x.name(), shape.str()));
  }
  if (units < 1)
    throw Error(fmt::format("dense '{}': units must be positive, got {}", name, units));
  const std::int64_t in = shape[shape.rank() - 1];
  Graph& g = x.graph();
  const Tensor kernel =
      layer_weight(g.variable(name + "/kernel", {in, units}, Initializer::glorot_uniform()));
  const Tensor bias = layer_weight(g.variable(name + "/bias", {units}, Initializer::zeros()));
  // matmul takes matrices: fold the leading dimensions into one and back.
  const bool fold = shape.rank() > 2;
  const Tensor x2 = fold ? reshape(x, {shape.elements() / in, in}) : x;
  // One dispatch (dense_fused.h); gelu, which it cannot fuse, comes after.
  // Under a half precision the product is matmul's (cast, half product, cast
  // back), then the bias and activation in f32.
  const bool half = g.options().precision != Precision::F32;
  const Activation fused = !half && fuses_activation(activation) ? activation : Activation::None;
  Tensor y = half ? bias_add(matmul(x2, kernel), bias) : matmul_bias_act(x2, kernel, bias, fused);
  if (fold) {
    std::vector<std::int64_t> dims = shape.dims();
    dims.back() = units;
    y = reshape(y, Shape(dims));
  }
  if (fused == activation) return y;
  return activate_layer_output(y, activation);
}

Tensor activate_layer_output(const Tensor& y, Activation activation) {
  // An activation whose gradient reads its input (gelu's, elu's...) would keep
  // that f32 pre-activation for the backward pass; under a half precision it
  // is stored in half, as autocast's linear output is, and the gradient reads
  // the half tensor (unary.cpp's policy_half_copy). One rounding more in the
  // forward pass, none in the chain's dispatches.
  const bool half = y.valid() && y.graph().options().precision != Precision::F32;
  return activate(half && reads_its_input(activation) ? policy_round(y) : y, activation);
}

}  // namespace vkt::layers
