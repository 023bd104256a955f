// matmul_bias_act (the fused dense layer, dense_fused.h): forward and gradients
// against a double CPU reference and finite differences, and against the
// unfused ops (matmul, bias_add, the activation) on both matmul kernels, every
// activation; fewer dispatches per training step.
#include <fmt/format.h>

#include <cmath>

#include <vktower/optimizers/sgd.h>
#include <vktower/runtime/graph/ops/dense_fused.h>
#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/runtime/graph/ops/matmul.h>

#include "../test_support.h"
#include "activation_reference.h"
#include "matmul_variant_scope.h"
#include "op_check.h"

using vkt::Shape;
using vkt::Tensor;
using vkt::layers::Activation;
using vkt::test::OpSpec;
using vkt::test::Values;
using vkt::test::VariantScope;

namespace {

const Activation kFused[] = {Activation::None,    Activation::Relu, Activation::Sigmoid,
                             Activation::Tanh,    Activation::Elu,  Activation::LeakyRelu,
                             Activation::Softplus};

/// act(x w + b) in double: x [m, k], w [k, n], b [n].
Values reference(const std::vector<Values>& in, std::int64_t m, std::int64_t k, std::int64_t n,
                 Activation act) {
  Values y(static_cast<std::size_t>(m * n));
  for (std::int64_t r = 0; r < m; ++r) {
    for (std::int64_t c = 0; c < n; ++c) {
      double z = in[2][static_cast<std::size_t>(c)];
      for (std::int64_t i = 0; i < k; ++i)
        z +=
            in[0][static_cast<std::size_t>(r * k + i)] * in[1][static_cast<std::size_t>(i * n + c)];
      y[static_cast<std::size_t>(r * n + c)] = vkt::test::activation_reference(act, z);
    }
  }
  return y;
}

void check_against_reference(std::int64_t m, std::int64_t k, std::int64_t n) {
  for (const Activation act : kFused) {
    INFO(fmt::format("{}x{} * {}x{}, activation {}", m, k, k, n, static_cast<int>(act)));
    OpSpec spec{
        .name = "matmul_bias_act",
        .shapes = {Shape{m, k}, Shape{k, n}, Shape{n}},
        .build =
            [&](const std::vector<Tensor>& t) {
              return vkt::matmul_bias_act(t[0], t[1], t[2], act);
            },
        .reference = [&](const std::vector<Values>& v) { return reference(v, m, k, n, act); }};
    vkt::test::check_op(spec);
  }
}

/// Forward and gradients (x, w, b) of L = sum(c * y) of the fused layer and of
/// the unfused ops, in one graph from the same values: the largest difference
/// relative to 1 + |unfused|.
double fused_vs_unfused(std::int64_t m, std::int64_t k, std::int64_t n, Activation act,
                        vkt::DenseBackward backward) {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", {m, k}), w = g.input("w", {k, n}), b = g.input("b", {n});
  const Tensor c = g.constant({m, n}, vkt::test::random_floats(m * n, 4));
  const Tensor fused =
      vkt::fuses_activation(act)
          ? vkt::matmul_bias_act(x, w, b, act, backward)
          : vkt::layers::activate(vkt::matmul_bias_act(x, w, b, Activation::None, backward), act);
  const Tensor plain = vkt::layers::activate(vkt::bias_add(vkt::matmul(x, w), b), act);
  const auto gf = vkt::gradients(vkt::reduce_sum(fused * c), {x, w, b});
  const auto gp = vkt::gradients(vkt::reduce_sum(plain * c), {x, w, b});
  const std::vector<Tensor> pairs[] = {{fused, plain},
                                       {gf[0].dense, gp[0].dense},
                                       {gf[1].dense, gp[1].dense},
                                       {gf[2].dense, gp[2].dense}};
  std::vector<Tensor> fetches;
  for (const auto& p : pairs) fetches.insert(fetches.end(), p.begin(), p.end());
  vkt::Executor exec(g, fetches);
  exec.feed("x", vkt::test::random_floats(m * k, 1, -2.0f, 2.0f));
  exec.feed("w", vkt::test::random_floats(k * n, 2));
  exec.feed("b", vkt::test::random_floats(n, 3));
  exec.run();
  double worst = 0;
  for (const auto& p : pairs) {
    const std::vector<float> a = exec.read(p[0]), e = exec.read(p[1]);
    REQUIRE(a.size() == e.size());
    for (std::size_t i = 0; i < a.size(); ++i)
      worst = std::max(worst, std::abs(double(a[i]) - e[i]) / (1.0 + std::abs(double(e[i]))));
  }
  return worst;
}

}  // namespace

TEST_CASE("matmul_bias_act texel kernel: every activation against the CPU, odd sizes",
          "[dense_fused]") {
  VariantScope variant("texel");
  check_against_reference(7, 13, 5);
  check_against_reference(19, 6, 70);  // 16-row blocks, 2 column texels per lane
}

TEST_CASE("matmul_bias_act tiled kernel: every activation against the CPU, odd sizes",
          "[dense_fused]") {
  VariantScope variant("tiled");
  check_against_reference(7, 13, 5);
  check_against_reference(67, 6, 70);  // two tiles each way
}

TEST_CASE("matmul_bias_act equals matmul, bias_add and the activation, forward and gradients",
          "[dense_fused]") {
  for (const char* v : {"texel", "tiled"}) {
    VariantScope variant(v);
    for (const auto backward : {vkt::DenseBackward::Materialized, vkt::DenseBackward::InMatmuls}) {
      for (const Activation act :
           {Activation::None, Activation::Relu, Activation::Sigmoid, Activation::Tanh,
            Activation::Gelu, Activation::Elu, Activation::LeakyRelu, Activation::Softplus}) {
        INFO(fmt::format("{} kernel, backward {}, activation {}", v,
                         backward == vkt::DenseBackward::InMatmuls ? "in matmuls" : "materialized",
                         static_cast<int>(act)));
        CHECK(fused_vs_unfused(7, 13, 5, act, backward) < 2e-6);
        CHECK(fused_vs_unfused(37, 150, 130, act, backward) < 2e-5);
        CHECK(fused_vs_unfused(300, 9, 20, act, backward) < 2e-5);  // the bias gradient's tree
        // 13 columns over 520 rows: 4 lanes across, 4 down (texel_view.h), the
        // last workgroup's second row block entirely past M.
        CHECK(fused_vs_unfused(520, 9, 13, act, backward) < 2e-5);
      }
    }
  }
}

TEST_CASE("layers::dense trains an MLP step in fewer dispatches than the unfused ops",
          "[dense_fused]") {
  const auto step_dispatches = [](bool fused, bool executor_fuses) {
    vkt::Graph g(vkt::test::shared_device(), {.seed = 1});
    const Tensor x = g.input("x", {32, 20});
    const Tensor labels = g.input("labels", {32}, vkt::DType::I32);
    Tensor h = x;
    const int widths[] = {16, 16, 10};
    for (int l = 0; l < 3; ++l) {
      const Activation act = l < 2 ? Activation::Relu : Activation::None;
      const std::string name = fmt::format("d{}", l);
      if (fused) {
        h = vkt::layers::dense(h, widths[l], act, name);
      } else {
        const Tensor w = g.variable(name + "/kernel", {h.shape()[1], widths[l]},
                                    vkt::Initializer::glorot_uniform());
        const Tensor b = g.variable(name + "/bias", {widths[l]}, vkt::Initializer::zeros());
        h = vkt::layers::activate(vkt::bias_add(vkt::matmul(h, w), b), act);
      }
    }
    const Tensor loss = vkt::sparse_softmax_cross_entropy(labels, h);
    vkt::SGD sgd(0.1f);
    const Tensor train = sgd.minimize(loss);
    vkt::Executor exec(g, {loss, train}, {.fuse = executor_fuses});
    return exec.dispatch_count();
  };
  const std::size_t fused = step_dispatches(true, false), plain = step_dispatches(false, false);
  INFO("dispatches per step, the Executor not fusing: fused " << fused << ", unfused " << plain);
  // Forward: 3 -> 1 per hidden layer, 2 -> 1 for the logits. Backward, with
  // dpre materialized (the default): 4 per hidden layer either way (dpre, the
  // bias gradient, two matmuls).
  CHECK(fused + 2 * 2 + 1 == plain);
  // The Executor fusing: the unfused layers' bias_add and relu become one
  // kernel, the dense layers' dpre and bias gradient one, and the loss with
  // its gradient one for both.
  const std::size_t fused_all = step_dispatches(true, true),
                    plain_all = step_dispatches(false, true);
  INFO("the Executor fusing: fused " << fused_all << ", unfused " << plain_all);
  CHECK(fused_all + 2 + 1 == fused);
  CHECK(plain_all + 2 + 1 == plain);
  // Still one fewer per layer forward (the matmul, then bias_add and relu in
  // one chain), and per hidden layer backward (relu_grad and the bias
  // gradient's reduce against one dense_pre_grad).
  CHECK(fused_all + 3 + 2 == plain_all);
}

TEST_CASE("matmul_bias_act errors", "[dense_fused]") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", {4, 3}), w = g.input("w", {3, 2}), b = g.input("b", {2});
  CHECK_THAT(vkt::test::error_of([&] {
               vkt::matmul_bias_act(x, g.input("w5", {5, 2}), b, Activation::Relu);
             }),
             Catch::Contains("[4, 3]") && Catch::Contains("[5, 2]"));
  CHECK_THAT(vkt::test::error_of(
                 [&] { vkt::matmul_bias_act(x, w, g.input("b3", {3}), Activation::Relu); }),
             Catch::Contains("bias [N]"));
  CHECK_THAT(vkt::test::error_of([&] { vkt::matmul_bias_act(x, w, b, Activation::Gelu); }),
             Catch::Contains("Activation::None"));
}
