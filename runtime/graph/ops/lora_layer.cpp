// layers::lora_dense: dense's frozen base plus a trainable low-rank adapter.
#include "layers.h"

#include <fmt/format.h>

#include <cmath>

#include "../../vulkan/error.h"
#include "../frozen_scope.h"
#include "../graph.h"
#include "elementwise.h"
#include "matmul.h"
#include "shape_ops.h"

namespace vkt::layers {
namespace {

/// Every mistake lora_dense can report, before any variable is made.
void check(const Tensor& x, std::int64_t units, const LoraOptions& lora, const std::string& name) {
  const std::string what = fmt::format("lora_dense '{}'", name);
  if (!x.valid()) throw Error(what + ": the input tensor is empty");
  if (x.shape().rank() < 2) {
    throw Error(fmt::format(
        "{}: input '{}' has shape {}; it needs a batch dimension and a feature dimension "
        "([batch, features])",
        what, x.name(), x.shape().str()));
  }
  if (units < 1) throw Error(fmt::format("{}: units must be positive, got {}", what, units));
  if (lora.rank < 1) {
    throw Error(fmt::format("{}: LoraOptions::rank must be at least 1, got {}", what, lora.rank));
  }
  if (!std::isfinite(lora.alpha) || lora.alpha <= 0) {
    throw Error(fmt::format("{}: LoraOptions::alpha must be a finite number above 0, got {}", what,
                            lora.alpha));
  }
  if (lora.base_dtype == DType::I32) {
    throw Error(what + ": LoraOptions::base_dtype must be f32, f16 or bf16, not i32");
  }
  // A base made earlier in this graph must already be the frozen one.
  if (const std::optional<Tensor> kernel = x.graph().find_variable(name + "/kernel")) {
    for (const Variable& v : x.graph().variables()) {
      if (!(v.tensor == *kernel)) continue;
      if (v.trainable || v.tensor.dtype() != lora.base_dtype) {
        throw Error(fmt::format(
            "{}: '{}' already exists as a {} {} variable (a dense layer of that name?); "
            "lora_dense needs its base frozen in {}: give one of the two layers another name",
            what, kernel->name(), v.trainable ? "trainable" : "frozen", to_string(v.tensor.dtype()),
            to_string(lora.base_dtype)));
      }
    }
  }
}

}  // namespace

Tensor lora_dense(const Tensor& x, std::int64_t units, const LoraOptions& lora,
                  Activation activation, const std::string& given_name) {
  const std::string name = layer_name(x, given_name, "dense");
  check(x, units, lora, name);
  Graph& g = x.graph();
  const Shape shape = x.shape();  // a copy: new nodes may move the graph's shapes
  const std::int64_t in = shape[shape.rank() - 1];
  Tensor base;
  {
    const FrozenScope frozen(g, lora.base_dtype);
    base = dense(x, units, Activation::None, name);  // [..., units]
  }
  // PEFT's kaiming_uniform(a = sqrt(5)) on [rank, in]: bound 1 / sqrt(in).
  const auto bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(in)));
  const Tensor a =
      g.variable(name + "/lora_a", {in, lora.rank}, Initializer::uniform(-bound, bound));
  const Tensor b = g.variable(name + "/lora_b", {lora.rank, units}, Initializer::zeros());
  const Tensor x2 = shape.rank() > 2 ? reshape(x, {shape.elements() / in, in}) : x;
  const Tensor adapter = matmul(matmul(x2, a), b) * (lora.alpha / static_cast<float>(lora.rank));
  return activate_layer_output(base + reshape(adapter, base.shape()), activation);
}

}  // namespace vkt::layers
