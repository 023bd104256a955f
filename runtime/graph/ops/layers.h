#pragma once
// Layers: ops together with the variables they own.

#include <cstdint>
#include <string>

#include "../tensor.h"
#include "conv.h"

namespace vkt::layers {

/// The activation a layer applies to its output (the elementwise ops of the
/// same names; LeakyRelu with slope 0.2, Elu with alpha 1, Gelu in tanh form).
enum class Activation { None, Relu, Sigmoid, Tanh, Gelu, Elu, LeakyRelu, Softplus };

/// `activation` applied to x (x itself for None).
Tensor activate(const Tensor& x, Activation activation);

/// A fully connected layer: act(bias_add(matmul(x, kernel), bias)) with the
/// variables "<name>/kernel" [in, units] (glorot_uniform) and "<name>/bias"
/// [units] (zeros), where in is x's last dimension. x [..., in] of rank 2 or
/// more gives [..., units]. Calling it again with the same name reuses the
/// variables (as every tower does); another input width is then a vkt::Error.
///
///   vkt::Tensor h = vkt::layers::dense(x, 128, vkt::layers::Activation::Relu, "hidden");
///   vkt::Tensor logits = vkt::layers::dense(h, 10, vkt::layers::Activation::None, "logits");
Tensor dense(const Tensor& x, std::int64_t units, Activation activation = Activation::None,
             const std::string& name = "dense");

/// A convolution layer: act(bias_add(conv2d(x, kernel, options), bias)) with the
/// variables "<name>/kernel" [KH, KW, C / groups, filters] (glorot_uniform) and
/// "<name>/bias" [filters] (zeros), for x [N, H, W, C]. Reuses its variables by
/// name as dense does (conv_layer.cpp).
///
///   vkt::Tensor h = vkt::layers::conv2d(images, 32, {5, 5}, {.padding = vkt::Padding::Same},
///                                       vkt::layers::Activation::Relu, "conv1");
Tensor conv2d(const Tensor& x, std::int64_t filters, std::array<std::int64_t, 2> kernel_size,
              const Conv2dOptions& options = {}, Activation activation = Activation::None,
              const std::string& name = "conv2d");

}  // namespace vkt::layers
