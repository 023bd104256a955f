// Activations stored in half under the precision policy: an activation that the
// next product reads as a half copy has its gradient computed from that copy
// (unary_grad_half.comp where the copy is a half tensor, the f32 kernel where
// it is rounded in place), so its f32 value is not kept for the backward pass.
// Each check can fail: the gradient from the f32 value differs from the one
// from the half copy by about the half type's roundoff, and the activation
// arena of a deep MLP keeps its f32 activations unless the copies replace them
// (0.75 of f32's on half kernels, 1.39 when it kept both).
#include <catch2/catch.hpp>

#include <cmath>
#include <optional>
#include <string>

#include <vktower/runtime/graph/autodiff.h>
#include <vktower/runtime/graph/executor.h>
#include <vktower/runtime/graph/graph.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/matmul.h>
#include <vktower/runtime/graph/ops/reduce.h>

#include "../shared_device.h"
#include "../test_support.h"
#include "matmul_variant_scope.h"

using vkt::Tensor;

namespace {

/// The node of type `type` in `g` (the test's graphs have one).
const vkt::Node& node_of_type(const vkt::Graph& g, const std::string& type) {
  for (const vkt::Node& node : g.nodes()) {
    if (node.op->type() == type) return node;
  }
  FAIL("no " << type << " node");
  return g.nodes().front();
}

/// A layer `x -> act(x w1 + b1) -> (.) w2`, its squared loss, and the gradient
/// of b1 (the activation's gradient summed over rows) checked against the
/// activation's gradient `dh` and its half copy, in double.
void check_activation_gradient(vkt::Precision precision, vkt::layers::Activation activation,
                               const std::string& grad_type, bool copy_is_half) {
  vkt::Graph g(vkt::test::shared_device(), {.seed = 3, .precision = precision});
  // 15 rows x 7 units: 105 elements, an odd count (the last half word has one).
  const Tensor x = g.input("x", {15, 9});
  const Tensor h = vkt::layers::dense(x, 7, activation, "hidden");
  const Tensor y = vkt::matmul(h, g.variable("w2", {7, 4}, vkt::Initializer::glorot_uniform()));
  const Tensor loss = vkt::reduce_mean(vkt::square(y - 0.5f));
  const Tensor b1 = *g.find_variable("hidden/bias");
  const std::vector<vkt::Gradient> grads = vkt::gradients(loss, {b1, h});

  // The next product's copy of h: a cast, or a rounding in place.
  std::optional<Tensor> copy;
  for (const vkt::Node& node : g.nodes()) {
    const std::string type = node.op->type();
    if (!node.inputs.empty() && node.inputs.front() == h &&
        (type == "cast" || type.rfind("round_", 0) == 0)) {
      copy = node.output;
    }
  }
  REQUIRE(copy);
  CHECK(vkt::is_half(copy->dtype()) == copy_is_half);
  // The gradient reads {t, dy}: the copy, the one forward tensor it needs.
  const vkt::Node& grad = node_of_type(g, grad_type);
  REQUIRE(grad.inputs.size() == 2);
  CHECK(grad.inputs[0] == *copy);

  // Fused, the gradient is a step of the chain that widens dh; unfused, its
  // own kernel (unary_grad_half.comp for a half copy): the same bits.
  std::vector<float> fused_db;
  for (const bool fuse : {true, false}) {
    vkt::Executor exec(g, {grads[0].dense, grads[1].dense, *copy}, {.fuse = fuse});
    exec.feed("x", vkt::test::random_floats(15 * 9, 4, -2.0f, 2.0f));
    exec.run();
    const std::vector<float> db = exec.read(grads[0].dense);
    const std::vector<float> dh = exec.read(grads[1].dense);
    const std::vector<float> hc = exec.read(*copy);
    if (fuse) fused_db = db;
    CHECK(db == fused_db);
    for (std::size_t j = 0; j < 7; ++j) {
      double expected = 0;
      for (std::size_t r = 0; r < 15; ++r) {
        const double v = hc[r * 7 + j], d = dh[r * 7 + j];
        expected += d * (activation == vkt::layers::Activation::Tanh ? 1.0 - v * v
                         : v > 0                                     ? 1.0
                                                                     : 0.0);
      }
      INFO("unit " << j << (fuse ? ", fused" : ", unfused"));
      // The f32 sums' rounding only: a gradient from the f32 activation is off
      // by about the half type's roundoff (2^-11 or 2^-8) of each term.
      CHECK(db[j] == Approx(expected).epsilon(1e-5).margin(1e-7));
    }
  }
}

/// The activation arena of one training step of a deep tanh MLP.
std::size_t mlp_activation_bytes(vkt::Precision precision) {
  vkt::Graph g(vkt::test::shared_device(), {.seed = 5, .precision = precision});
  Tensor h = g.input("x", {512, 64});
  for (int layer = 0; layer < 4; ++layer) {
    h = vkt::layers::dense(h, 64, vkt::layers::Activation::Tanh, "dense_" + std::to_string(layer));
  }
  const Tensor loss =
      vkt::reduce_mean(vkt::square(vkt::layers::dense(h, 8, vkt::layers::Activation::None)));
  std::vector<Tensor> fetches{loss};
  for (const vkt::Gradient& grad : vkt::gradients(loss, g.trainable_variables())) {
    fetches.push_back(grad.dense);
  }
  return vkt::Executor(g, fetches).activation_bytes();
}

}  // namespace

TEST_CASE("under fp16 on half kernels an activation's gradient reads the half copy of it") {
  const vkt::test::VariantScope tiled("tiled");
  check_activation_gradient(vkt::Precision::F16, vkt::layers::Activation::Tanh, "tanh_grad", true);
  check_activation_gradient(vkt::Precision::BF16, vkt::layers::Activation::Relu, "relu_grad", true);
}

TEST_CASE("under bf16 on the texel kernel an activation's gradient reads its rounding in place") {
  const vkt::test::VariantScope texel("texel");
  check_activation_gradient(vkt::Precision::BF16, vkt::layers::Activation::Tanh, "tanh_grad",
                            false);
  check_activation_gradient(vkt::Precision::F16, vkt::layers::Activation::Relu, "relu_grad", false);
}

TEST_CASE("a deep MLP's activation memory under fp16 on half kernels is under f32's") {
  const vkt::test::VariantScope tiled("tiled");
  const std::size_t f32 = mlp_activation_bytes(vkt::Precision::F32);
  const std::size_t f16 = mlp_activation_bytes(vkt::Precision::F16);
  INFO("activation arena: f32 " << f32 << " bytes, fp16 " << f16);
  // Four 512 x 64 activations kept for the backward pass, 2 bytes an element
  // instead of 4, beside the weights' half copies and the f32 gradients: 0.75
  // of f32 (with the f32 activations kept beside their copies it was 1.39).
  CHECK(f16 * 5 < f32 * 4);
}

TEST_CASE(
    "on the texel kernel an activation's rounding in place replaces it in the backward pass") {
  const vkt::test::VariantScope texel("texel");
  const std::size_t f32 = mlp_activation_bytes(vkt::Precision::F32);
  const std::size_t f16 = mlp_activation_bytes(vkt::Precision::F16);
  INFO("activation arena: f32 " << f32 << " bytes, fp16 " << f16);
  // The texel kernel reads f32, so the rounded operands are f32 tensors (the
  // weights' included): more than f32 keeps, but less than one more copy of
  // the four activations (4 x 512 x 64 x 4 bytes); with the f32 activations
  // kept beside their roundings it was more than that.
  CHECK(f16 < f32 + 4 * 512 * 64 * 4);
}
