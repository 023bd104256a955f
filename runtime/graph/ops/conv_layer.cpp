// layers::conv2d: conv2d with its kernel and bias variables.
#include <fmt/format.h>

#include "../../vulkan/error.h"
#include "../frozen_scope.h"
#include "../graph.h"
#include "conv.h"
#include "layers.h"
#include "matmul.h"

namespace vkt::layers {

Tensor conv2d(const Tensor& x, std::int64_t filters, std::array<std::int64_t, 2> kernel_size,
              const Conv2dOptions& options, Activation activation, const std::string& given_name) {
  const std::string name = layer_name(x, given_name, "conv2d");
  if (!x.valid()) throw Error(fmt::format("conv2d '{}': the input tensor is empty", name));
  const Shape& shape = x.shape();
  // The kernel's shape needs x's channels and the groups: check what that uses
  // before making the variable, and leave the rest to vkt::conv2d.
  if (shape.rank() != 4) {
    throw Error(fmt::format(
        "conv2d '{}': input '{}' has shape {}; it needs images [batch, height, width, channels]",
        name, x.name(), shape.str()));
  }
  if (filters < 1 || kernel_size[0] < 1 || kernel_size[1] < 1) {
    throw Error(
        fmt::format("conv2d '{}': filters and kernel sizes must be positive, got {} "
                    "filters of {}x{}",
                    name, filters, kernel_size[0], kernel_size[1]));
  }
  if (options.groups < 1 || shape[3] % options.groups != 0 || filters % options.groups != 0) {
    throw Error(fmt::format(
        "conv2d '{}': groups = {} must divide both the {} channels of '{}' {} and the {} filters",
        name, options.groups, shape[3], x.name(), shape.str(), filters));
  }
  Graph& g = x.graph();
  const Tensor kernel = layer_weight(g.variable(
      name + "/kernel", {kernel_size[0], kernel_size[1], shape[3] / options.groups, filters},
      Initializer::glorot_uniform()));
  const Tensor bias = layer_weight(g.variable(name + "/bias", {filters}, Initializer::zeros()));
  return activate(bias_add(vkt::conv2d(x, kernel, options), bias), activation);
}

}  // namespace vkt::layers
