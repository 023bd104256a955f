// layers::lora_dense: its variables (the base frozen in its type under dense's
// names, the adapter trainable), values and gradients against a double
// reference, its start as its base, and its mistakes.
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <vktower/vktower.h>

#include "../shared_device.h"
#include "../test_support.h"
#include "op_check.h"

using Catch::Matchers::Contains;
using vkt::DType;
using vkt::Tensor;
using vkt::layers::Activation;
using vkt::layers::LoraOptions;
using vkt::test::error_of;
using vkt::test::matmul_reference;
using vkt::test::rounded_to_half;
using vkt::test::Values;

namespace {

// x [2, 3, kIn]: rank 3, so the layer folds the leading dimensions.
constexpr std::int64_t kRows = 6, kIn = 5, kUnits = 4, kRank = 2;
constexpr float kAlpha = 3.0f;  // scale 1.5

const vkt::Variable& variable(vkt::Graph& g, const std::string& name) {
  for (const vkt::Variable& v : g.variables()) {
    if (v.tensor.name() == name) return v;
  }
  FAIL("no variable " << name);
  throw;
}

std::vector<double> wide(const std::vector<float>& v) {
  return {v.begin(), v.end()};
}

void check_near(const std::vector<float>& got, const Values& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(want[i]).epsilon(1e-5).margin(1e-6));
  }
}

}  // namespace

TEST_CASE(
    "lora_dense: the base frozen in its type under dense's names, values and gradients against "
    "a double reference") {
  for (const DType base_dtype : {DType::F32, DType::BF16}) {
    INFO(vkt::to_string(base_dtype));
    vkt::Graph g(vkt::test::shared_device());
    const Tensor x = g.input("x", {2, 3, kIn});
    const Tensor y = vkt::layers::lora_dense(
        x, kUnits, {.rank = kRank, .alpha = kAlpha, .base_dtype = base_dtype}, Activation::Tanh,
        "ft");
    CHECK(y.shape() == vkt::Shape{2, 3, kUnits});
    for (const char* name : {"ft/kernel", "ft/bias"}) {
      const vkt::Variable& v = variable(g, name);
      CHECK(v.tensor.dtype() == base_dtype);
      CHECK_FALSE(v.trainable);
      CHECK(v.frozen_weight);  // warm start fills it
    }
    for (const char* name : {"ft/lora_a", "ft/lora_b"}) {
      CHECK(variable(g, name).trainable);
      CHECK(variable(g, name).tensor.dtype() == DType::F32);
    }
    CHECK(g.values(variable(g, "ft/lora_b").tensor) == std::vector<float>(kRank * kUnits, 0.0f));
    const std::vector<float> bound_check = g.values(variable(g, "ft/lora_a").tensor);
    for (const float v : bound_check) CHECK(std::abs(v) <= 1.0f / std::sqrt(float(kIn)));

    const std::vector<float> c = vkt::test::random_floats(kRows * kUnits, 11);
    const Tensor loss = vkt::reduce_sum(y * g.constant(y.shape(), c));
    const Tensor a = variable(g, "ft/lora_a").tensor, b = variable(g, "ft/lora_b").tensor;
    const std::vector<vkt::Gradient> d = vkt::gradients(loss, {a, b, x});
    vkt::Executor exec(g, {y, d[0].dense, d[1].dense, d[2].dense});
    const std::vector<float> xs = vkt::test::random_floats(kRows * kIn, 12);
    const std::vector<float> kernel =
        rounded_to_half(vkt::test::random_floats(kIn * kUnits, 13), DType::BF16);
    const std::vector<float> bias =
        rounded_to_half(vkt::test::random_floats(kUnits, 14), DType::BF16);
    const std::vector<float> av = vkt::test::random_floats(kIn * kRank, 15);
    const std::vector<float> bv = vkt::test::random_floats(kRank * kUnits, 16);
    g.assign(variable(g, "ft/kernel").tensor, kernel);
    g.assign(variable(g, "ft/bias").tensor, bias);
    g.assign(a, av);
    g.assign(b, bv);
    exec.feed("x", xs);
    exec.run();

    // pre = x K + bias + 1.5 (x A) B, y = tanh(pre), loss = sum(c y).
    const double scale = kAlpha / kRank;
    const Values xa = matmul_reference(wide(xs), wide(av), {kRows, kIn, kRank});
    const Values xab = matmul_reference(xa, wide(bv), {kRows, kRank, kUnits});
    Values pre = matmul_reference(wide(xs), wide(kernel), {kRows, kIn, kUnits});
    Values want_y(pre.size()), dpre(pre.size());
    for (std::size_t i = 0; i < pre.size(); ++i) {
      pre[i] += bias[i % kUnits] + scale * xab[i];
      want_y[i] = std::tanh(pre[i]);
      dpre[i] = c[i] * (1 - want_y[i] * want_y[i]);
    }
    // dB = s (xA)^T dpre, dA = s x^T (dpre B^T), dx = dpre K^T + s dpre B^T A^T.
    const Values dxa = matmul_reference(dpre, wide(bv), {kRows, kUnits, kRank}, false, true);
    Values want_da = matmul_reference(wide(xs), dxa, {kIn, kRows, kRank}, true);
    Values want_db = matmul_reference(xa, dpre, {kRank, kRows, kUnits}, true);
    for (double& v : want_da) v *= scale;
    for (double& v : want_db) v *= scale;
    Values want_dx = matmul_reference(dpre, wide(kernel), {kRows, kUnits, kIn}, false, true);
    const Values dx_adapter = matmul_reference(dxa, wide(av), {kRows, kRank, kIn}, false, true);
    for (std::size_t i = 0; i < want_dx.size(); ++i) want_dx[i] += scale * dx_adapter[i];
    check_near(exec.read(y), want_y);
    check_near(exec.read(d[0].dense), want_da);
    check_near(exec.read(d[1].dense), want_db);
    check_near(exec.read(d[2].dense), want_dx);
  }
}

TEST_CASE("lora_dense starts as its base: the output of dense with the same kernel and bias") {
  const std::vector<float> xs = vkt::test::random_floats(kRows * kIn, 21);
  const auto output = [&](bool lora, const std::vector<float>& kernel,
                          const std::vector<float>& bias) {
    vkt::Graph g(vkt::test::shared_device(), {.seed = 4});
    const Tensor x = g.input("x", {kRows, kIn});
    const Tensor y = lora ? vkt::layers::lora_dense(x, kUnits, {.base_dtype = DType::F32},
                                                    Activation::Relu, "layer")
                          : vkt::layers::dense(x, kUnits, Activation::Relu, "layer");
    vkt::Executor exec(g, {y});
    if (!kernel.empty()) {
      g.assign(*g.find_variable("layer/kernel"), kernel);
      g.assign(*g.find_variable("layer/bias"), bias);
    }
    exec.feed("x", xs);
    exec.run();
    return std::pair{exec.read(y), std::pair{g.values(*g.find_variable("layer/kernel")),
                                             g.values(*g.find_variable("layer/bias"))}};
  };
  const auto [dense_y, weights] = output(false, {}, {});
  const auto bias = vkt::test::random_floats(kUnits, 22);
  const auto [dense_biased, unused] = output(false, weights.first, bias);
  // Same seed and name: the same initial kernel as dense's.
  CHECK(output(true, {}, {}).second.first == weights.first);
  CHECK(output(true, {}, {}).first == dense_y);
  CHECK(output(true, weights.first, bias).first == dense_biased);
}

TEST_CASE("lora_dense mistakes are one line each, before any variable is made") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", {kRows, kIn});
  vkt::layers::dense(x, kUnits, Activation::None, "pretrained");
  const std::size_t made = g.variables().size();
  const auto error = [&](const LoraOptions& o, std::int64_t units = kUnits,
                         const std::string& name = "ft") {
    return error_of([&] { vkt::layers::lora_dense(x, units, o, Activation::None, name); });
  };
  CHECK_THAT(error({.rank = 0}),
             Contains("lora_dense 'ft'") && Contains("rank must be at least 1"));
  CHECK_THAT(error({.alpha = 0}), Contains("alpha must be a finite number above 0"));
  CHECK_THAT(error({.alpha = std::numeric_limits<float>::quiet_NaN()}), Contains("alpha"));
  CHECK_THAT(error({.base_dtype = DType::I32}), Contains("base_dtype must be f32, f16 or bf16"));
  CHECK_THAT(error({}, 0), Contains("units must be positive"));
  CHECK_THAT(error({}, kUnits, "pretrained"),
             Contains("'pretrained/kernel' already exists as a trainable f32 variable") &&
                 Contains("another name"));
  CHECK(g.variables().size() == made);
}

TEST_CASE(
    "a transformer block under LoRA: only the attention's adapters train, every other weight "
    "frozen in the base type, and it starts as the plain block") {
  const std::vector<float> xs = vkt::test::random_floats(2 * 4 * 8, 31);
  const std::vector<float> c = vkt::test::random_floats(2 * 4 * 8, 32);
  const auto block = [&](vkt::Graph& g, const std::optional<LoraOptions>& lora) {
    const Tensor x = g.input("x", {2, 4, 8});
    return vkt::layers::transformer_block(x, 2, {.lora = lora}, "blk");
  };
  for (const DType base_dtype : {DType::F32, DType::BF16}) {
    INFO(vkt::to_string(base_dtype));
    vkt::Graph g(vkt::test::shared_device(), {.seed = 3});
    const Tensor y = block(g, LoraOptions{.rank = 2, .alpha = 4, .base_dtype = base_dtype});
    std::vector<std::string> trainable;
    std::vector<Tensor> adapters;
    for (const vkt::Variable& v : g.variables()) {
      if (v.trainable) {
        trainable.push_back(v.tensor.name());
        adapters.push_back(v.tensor);
        continue;
      }
      INFO(v.tensor.name());
      CHECK(v.frozen_weight);
      CHECK(v.tensor.dtype() == base_dtype);
    }
    CHECK(trainable ==
          std::vector<std::string>{"blk/attention/qkv/lora_a", "blk/attention/qkv/lora_b",
                                   "blk/attention/out/lora_a", "blk/attention/out/lora_b"});
    const Tensor loss = vkt::reduce_sum(y * g.constant(y.shape(), c));
    const std::vector<vkt::Gradient> d = vkt::gradients(loss, adapters);
    std::vector<Tensor> fetches{y};
    for (const vkt::Gradient& grad : d) fetches.push_back(grad.dense);
    vkt::Executor exec(g, fetches);
    exec.feed("x", xs);
    exec.run();
    // lora_b starts at zero: lora_a gets no gradient yet, lora_b does.
    CHECK(exec.read(d[0].dense) == std::vector<float>(8 * 2, 0.0f));
    CHECK(exec.read(d[1].dense) != std::vector<float>(2 * 24, 0.0f));
    if (base_dtype != DType::F32) continue;
    // The plain block with the same weights gives the same output.
    vkt::Graph plain(vkt::test::shared_device());
    const Tensor plain_y = block(plain, std::nullopt);
    vkt::Executor plain_exec(plain, {plain_y});
    for (const vkt::Variable& v : plain.variables()) {
      plain.assign(v.tensor, g.values(*g.find_variable(v.tensor.name())));
    }
    plain_exec.feed("x", xs);
    plain_exec.run();
    CHECK(plain_exec.read(plain_y) == exec.read(y));
  }
}
