#pragma once
// Layers: ops together with the variables they own.

#include <cstdint>
#include <string>

#include "../tensor.h"

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

}  // namespace vkt::layers
