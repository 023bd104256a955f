// PrecisionScope: a stretch of a graph under another precision policy than the
// graph's, forward and gradients (which autodiff builds after the scope has
// gone), on the texel kernels and on the tiled ones that read half tensors.
#include <bit>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <vktower/vktower.h>

#include "../shared_device.h"
#include "../test_support.h"
#include "matmul_variant_scope.h"

using Catch::Matchers::Contains;
using vkt::Precision;
using vkt::Tensor;
using vkt::test::float_bits;

namespace {

constexpr std::int64_t kRows = 5, kIn = 7, kHidden = 6, kOut = 3;

using Values = std::map<std::string, std::vector<float>>;

/// Gives each trainable variable of `g` values drawn from its name, so that
/// graphs sharing a layer's name share its weights.
void set_weights(vkt::Graph& g) {
  for (const Tensor& v : g.trainable_variables()) {
    const auto seed = static_cast<std::uint32_t>(std::hash<std::string>{}(v.name()));
    g.assign(v, vkt::test::random_floats(v.shape().elements(), seed, -0.8f, 0.8f));
  }
}

/// Runs `g` once on `feeds` and reads `fetches`, by name.
Values run(vkt::Graph& g, const std::map<std::string, Tensor>& fetches, const Values& feeds) {
  std::vector<Tensor> list;
  for (const auto& [name, t] : fetches) list.push_back(t);
  vkt::Executor exec(g, list);
  set_weights(g);
  for (const auto& [name, values] : feeds) exec.feed(name, values);
  exec.run();
  Values out;
  for (const auto& [name, t] : fetches) out[name] = exec.read(t);
  return out;
}

/// The loss sum(y * c), c fixed: its gradient for y is c, exactly.
Tensor weighted_sum(const Tensor& y, std::uint32_t seed) {
  const Tensor c = y.graph().constant(
      y.shape(), vkt::test::random_floats(static_cast<std::size_t>(y.shape().elements()), seed));
  return vkt::reduce_sum(y * c);
}

/// The output layer alone in a graph under `precision`, fed h: y, and the
/// gradients of weighted_sum(y) for h and the layer's weights.
Values output_layer(Precision precision, const std::vector<float>& h) {
  vkt::Graph g(vkt::test::shared_device(), {.precision = precision});
  const Tensor hin = g.input("h", {kRows, kHidden});
  const Tensor y = vkt::layers::dense(hin, kOut, vkt::layers::Activation::Gelu, "out");
  const std::vector<vkt::Gradient> d = vkt::gradients(
      weighted_sum(y, 31), {hin, *g.find_variable("out/kernel"), *g.find_variable("out/bias")});
  return run(g, {{"y", y}, {"dh", d[0].dense}, {"dkernel", d[1].dense}, {"dbias", d[2].dense}},
             {{"h", h}});
}

/// The hidden layer alone under `precision`, its output's gradient given (dh):
/// h, and the gradients for x and the layer's weights.
Values hidden_layer(Precision precision, const std::vector<float>& x,
                    const std::vector<float>& dh) {
  vkt::Graph g(vkt::test::shared_device(), {.precision = precision});
  const Tensor xin = g.input("x", {kRows, kIn});
  const Tensor h = vkt::layers::dense(xin, kHidden, vkt::layers::Activation::Tanh, "hidden");
  const Tensor loss = vkt::reduce_sum(h * g.constant(h.shape(), dh));
  const std::vector<vkt::Gradient> d = vkt::gradients(
      loss, {xin, *g.find_variable("hidden/kernel"), *g.find_variable("hidden/bias")});
  return run(g, {{"h", h}, {"dx", d[0].dense}, {"dkernel", d[1].dense}, {"dbias", d[2].dense}},
             {{"x", x}});
}

/// Two dense layers in a graph under `outer`, the second (gelu, whose
/// gradient reads its input) inside a PrecisionScope of `inner`: the two
/// layers' values and gradients, each the bits of that layer alone in a graph
/// of its precision (chain rule: the loss's gradient for h is what the hidden
/// layer alone is given), and the output layer's not those of `outer`.
void check_scoped_model(Precision outer, Precision inner) {
  INFO("graph " << vkt::to_string(outer) << ", scope " << vkt::to_string(inner));
  const std::vector<float> x = vkt::test::random_floats(kRows * kIn, 30, -2.0f, 2.0f);
  vkt::Graph g(vkt::test::shared_device(), {.precision = outer});
  const Tensor xin = g.input("x", {kRows, kIn});
  const Tensor h = vkt::layers::dense(xin, kHidden, vkt::layers::Activation::Tanh, "hidden");
  Tensor y;
  {
    const vkt::PrecisionScope scope(g, inner);
    y = vkt::layers::dense(h, kOut, vkt::layers::Activation::Gelu, "out");
  }
  CHECK(g.options().precision == outer);
  std::vector<Tensor> wrt{xin};
  for (const char* name : {"hidden/kernel", "hidden/bias", "out/kernel", "out/bias"}) {
    wrt.push_back(*g.find_variable(name));
  }
  // Built after the scope has gone, as an optimizer's minimize builds them.
  const std::vector<vkt::Gradient> d = vkt::gradients(weighted_sum(y, 31), wrt);
  const std::map<std::string, Tensor> fetches{{"h", h},
                                              {"y", y},
                                              {"dx", d[0].dense},
                                              {"dhidden/kernel", d[1].dense},
                                              {"dhidden/bias", d[2].dense},
                                              {"dout/kernel", d[3].dense},
                                              {"dout/bias", d[4].dense}};
  const Values got = run(g, fetches, {{"x", x}});

  const Values out = output_layer(inner, got.at("h"));
  CHECK(float_bits(got.at("y")) == float_bits(out.at("y")));
  CHECK(float_bits(got.at("dout/kernel")) == float_bits(out.at("dkernel")));
  CHECK(float_bits(got.at("dout/bias")) == float_bits(out.at("dbias")));
  const Values hidden = hidden_layer(outer, x, out.at("dh"));
  CHECK(float_bits(got.at("h")) == float_bits(hidden.at("h")));
  CHECK(float_bits(got.at("dx")) == float_bits(hidden.at("dx")));
  CHECK(float_bits(got.at("dhidden/kernel")) == float_bits(hidden.at("dkernel")));
  CHECK(float_bits(got.at("dhidden/bias")) == float_bits(hidden.at("dbias")));
  // The scope changed something: the output layer under the graph's policy
  // computes other values, and other gradients.
  const Values unscoped = output_layer(outer, got.at("h"));
  CHECK(float_bits(got.at("y")) != float_bits(unscoped.at("y")));
  CHECK(float_bits(out.at("dh")) != float_bits(unscoped.at("dh")));
  CHECK(float_bits(got.at("dout/kernel")) != float_bits(unscoped.at("dkernel")));
}

void check_scoped_models() {
  check_scoped_model(Precision::F16, Precision::F32);
  check_scoped_model(Precision::BF16, Precision::F32);
  check_scoped_model(Precision::F32, Precision::F16);
  check_scoped_model(Precision::F32, Precision::BF16);
  check_scoped_model(Precision::F16, Precision::BF16);
}

}  // namespace

TEST_CASE(
    "a PrecisionScope computes its layer, and that layer's gradients, under its own precision: "
    "the bits of the layer alone in a graph of that precision") {
  const vkt::test::VariantScope texel("texel");
  check_scoped_models();
}

TEST_CASE(
    "where products take half tensors a PrecisionScope's layer has the bits of the layer alone "
    "in a graph of its precision") {
  const vkt::test::VariantScope tiled("tiled");
  check_scoped_models();
}

namespace {

Precision node_precision(const Tensor& t) {
  return t.graph().nodes()[static_cast<std::size_t>(t.graph().info(t).node)].precision;
}

}  // namespace

TEST_CASE("PrecisionScopes nest and give back the policy that was in effect") {
  vkt::Graph g(vkt::test::shared_device(), {.precision = Precision::F16});
  const Tensor a = g.input("a", {4, 4});
  {
    const vkt::PrecisionScope f32(g, Precision::F32);
    CHECK(g.options().precision == Precision::F32);
    const Tensor p = vkt::matmul(a, a);
    CHECK(node_precision(p) == Precision::F32);
    {
      const vkt::PrecisionScope bf16(g, Precision::BF16);
      CHECK(g.options().precision == Precision::BF16);
      const Tensor q = vkt::matmul(p, a);
      CHECK(node_precision(q) == Precision::BF16);
    }
    CHECK(g.options().precision == Precision::F32);
  }
  CHECK(g.options().precision == Precision::F16);
  const Tensor r = vkt::matmul(a, a);
  CHECK(node_precision(r) == Precision::F16);
}

TEST_CASE(
    "a half precision on a device without 16-bit storage buffers is refused by PrecisionScope "
    "and by GraphOptions, naming the device") {
  vkt::test::shared_device();
  vkt::DeviceOptions options = vkt::DeviceOptions::from_environment();
  options.disable_16bit_storage = true;
  vkt::Device device(*vkt::test::shared_slot().instance, 0, options);
  const std::string name = device.info().name;
  vkt::Graph g(device);
  const std::string scope_error =
      vkt::test::error_of([&] { vkt::PrecisionScope s(g, Precision::F16); });
  CHECK_THAT(scope_error, Contains("PrecisionScope fp16: device 0 (" + name + ")") &&
                              Contains("16-bit storage") && Contains("compute in fp32 there"));
  CHECK(g.options().precision == Precision::F32);
  const vkt::PrecisionScope f32(g, Precision::F32);  // f32 needs nothing
  const std::string graph_error =
      vkt::test::error_of([&] { vkt::Graph half(device, {.precision = Precision::BF16}); });
  CHECK_THAT(graph_error, Contains("GraphOptions::precision bf16: device 0 (" + name + ")") &&
                              Contains("storageBuffer16BitAccess"));
}
