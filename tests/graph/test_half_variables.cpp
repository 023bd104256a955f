// Frozen half variables (Graph::variable with dtype F16 or BF16): stored in
// half the bytes, initialized and assigned by rounding, read widened, used
// through cast with the bits of an f32 variable holding the rounded values,
// and saved to checkpoints in their own type.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <vktower/runtime/io/checkpoint_file.h>
#include <vktower/vktower.h>

#include "../shared_device.h"
#include "../test_support.h"
#include "matmul_variant_scope.h"

using Catch::Matchers::Contains;
using vkt::DType;
using vkt::Precision;
using vkt::Tensor;
using vkt::test::error_of;
using vkt::test::float_bits;
using vkt::test::rounded_to_half;

namespace {

constexpr std::int64_t kRows = 5, kIn = 7, kOut = 3;

/// The frozen weight [kIn, kOut] every product here uses: values that are not
/// half values, so a missing rounding shows.
std::vector<float> weight_values() {
  return vkt::test::random_floats(kIn * kOut, 41, -0.9f, 0.9f);
}

struct Outputs {
  std::vector<float> y, dx, dbias;
};

/// y = tanh(x w + bias) under `precision`, w the frozen variable "w" of
/// `w_dtype` holding `w_values`, the loss sum(y * c): y and the gradients for
/// x and the trainable bias.
Outputs frozen_product(Precision precision, DType w_dtype, const std::vector<float>& w_values) {
  vkt::Graph g(vkt::test::shared_device(), {.precision = precision});
  const Tensor x = g.input("x", {kRows, kIn});
  const Tensor w = g.variable("w", {kIn, kOut}, vkt::Initializer::zeros(), false, w_dtype);
  const Tensor bias = g.variable("bias", {kOut}, vkt::Initializer::constant(0.25f));
  const Tensor y = vkt::tanh(vkt::bias_add(vkt::matmul(x, vkt::cast(w, DType::F32)), bias));
  const Tensor c = g.constant(y.shape(), vkt::test::random_floats(kRows * kOut, 43));
  const std::vector<vkt::Gradient> d = vkt::gradients(vkt::reduce_sum(y * c), {x, bias});
  vkt::Executor exec(g, {y, d[0].dense, d[1].dense});
  g.assign(w, w_values);
  exec.feed("x", vkt::test::random_floats(kRows * kIn, 42, -2.0f, 2.0f));
  exec.run();
  return {exec.read(y), exec.read(d[0].dense), exec.read(d[1].dense)};
}

}  // namespace

TEST_CASE("a half variable holds its initial values rounded to its type, in half the bytes") {
  for (const DType dtype : {DType::F16, DType::BF16}) {
    INFO(vkt::to_string(dtype));
    vkt::Graph f32(vkt::test::shared_device(), {.seed = 5});
    vkt::Graph half(vkt::test::shared_device(), {.seed = 5});
    const auto glorot = vkt::Initializer::glorot_uniform();
    const Tensor a = f32.variable("w", {3, 7}, glorot, false);
    const Tensor b = half.variable("w", {3, 7}, glorot, false, dtype);
    // An odd count of elements: the bytes are whole words, as every half tensor's.
    const Tensor odd = half.variable("odd", {5}, vkt::Initializer::constant(0.1f), false, dtype);
    CHECK(b.dtype() == dtype);
    const std::vector<float> exact = f32.values(a);
    CHECK(float_bits(half.values(b)) == float_bits(rounded_to_half(exact, dtype)));
    CHECK(float_bits(half.values(b)) != float_bits(exact));
    CHECK(half.variable_range(b).size() == 44);  // 21 halves, padded to 11 words
    CHECK(half.variable_range(odd).size() == 12);
    CHECK(half.values(odd) == rounded_to_half(std::vector<float>(5, 0.1f), dtype));
    CHECK(f32.frozen_bytes() == 0);  // nothing frozen

    // assign rounds to the type (ties to even); values() widens exactly.
    const std::vector<float> given = {1.0f + 1.0f / 4096, 65520.0f, -3e-8f, 0.0f, -0.0f};
    half.assign(odd, given);
    CHECK(float_bits(half.values(odd)) == float_bits(rounded_to_half(given, dtype)));
  }
}

TEST_CASE(
    "a frozen half variable read through cast has the bits of an f32 one holding its "
    "rounded values, on both kernels and under every precision") {
  const char* kernels = GENERATE("tiled", "texel");
  INFO(kernels);
  const vkt::test::VariantScope scope(kernels);
  for (const DType dtype : {DType::F16, DType::BF16}) {
    const std::vector<float> w = rounded_to_half(weight_values(), dtype);
    for (const Precision precision : {Precision::F32, Precision::F16, Precision::BF16}) {
      INFO(vkt::to_string(dtype) << " variable, " << vkt::to_string(precision));
      const Outputs half = frozen_product(precision, dtype, weight_values());
      const Outputs f32 = frozen_product(precision, DType::F32, w);
      CHECK(float_bits(half.y) == float_bits(f32.y));
      CHECK(float_bits(half.dx) == float_bits(f32.dx));
      CHECK(float_bits(half.dbias) == float_bits(f32.dbias));
      // Not the product of the weight unrounded (which a policy of the
      // variable's own type rounds alike).
      if (vkt::compute_dtype(precision) != dtype) {
        CHECK(float_bits(half.y) !=
              float_bits(frozen_product(precision, DType::F32, weight_values()).y));
      }
    }
  }
}

TEST_CASE(
    "under the half precision of its type a frozen half variable enters the product as "
    "it is stored, with no cast of its own") {
  const vkt::test::VariantScope scope("tiled");  // products that take half tensors (GPUs)
  vkt::Graph g(vkt::test::shared_device(), {.precision = Precision::BF16});
  const Tensor x = g.input("x", {kRows, kIn});
  const Tensor w = g.variable("w", {kIn, kOut}, vkt::Initializer::zeros(), false, DType::BF16);
  (void)vkt::matmul(x, vkt::cast(w, DType::F32));
  int casts_to_half = 0, products_of_w = 0;
  for (const vkt::Node& node : g.nodes()) {
    casts_to_half += node.op->type() == "cast" && node.output.dtype() == DType::BF16;
    for (const Tensor& in : node.inputs) products_of_w += in.id() == w.id();
  }
  CHECK(casts_to_half == 1);  // x's alone
  CHECK(products_of_w == 2);  // the widening cast, and the half product itself
}

TEST_CASE(
    "on the texel kernel under the precision of its type a frozen half variable is "
    "widened once and not rounded again") {
  const vkt::test::VariantScope scope("texel");  // CPU devices: f32 products of rounded values
  vkt::Graph g(vkt::test::shared_device(), {.precision = Precision::F16});
  const Tensor x = g.input("x", {kRows, kIn});
  const Tensor w = g.variable("w", {kIn, kOut}, vkt::Initializer::zeros(), false, DType::F16);
  const Tensor wide = vkt::cast(w, DType::F32);
  (void)vkt::matmul(x, wide);
  int rounds_of_w = 0;
  for (const vkt::Node& node : g.nodes()) {
    for (const Tensor& in : node.inputs) {
      rounds_of_w += in.id() == wide.id() && node.op->type().rfind("round_", 0) == 0;
    }
  }
  CHECK(rounds_of_w == 0);
  CHECK(vkt::round_to_half(wide, DType::F16).id() == wide.id());
  CHECK(vkt::round_to_half(wide, DType::BF16).id() != wide.id());  // another type: rounded
}

TEST_CASE("the frozen half variables lie before every other variable in the arena") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor a = g.variable("a", {3}, vkt::Initializer::zeros(), false, DType::BF16);
  const Tensor b = g.variable("b", {5});
  const Tensor c = g.variable("c", {7}, vkt::Initializer::zeros(), false, DType::F16);
  const Tensor d = g.variable("d", {2}, vkt::Initializer::zeros(), false);
  const std::size_t frozen = g.frozen_bytes();
  for (const Tensor& t : {a, c}) {
    CHECK(g.variable_range(t).offset + g.variable_range(t).size() <= frozen);
  }
  for (const Tensor& t : {b, d}) CHECK(g.variable_range(t).offset >= frozen);
  CHECK(g.variable_range(a).offset < g.variable_range(c).offset);  // in the order made
  CHECK(frozen > 0);
}

TEST_CASE("a checkpoint stores a half variable in its type and loads it bit for bit") {
  vkt::test::TempDir dir;
  const std::string path = dir / "frozen.safetensors";
  vkt::Graph saved(vkt::test::shared_device(), {.seed = 3});
  const Tensor w =
      saved.variable("w", {3, 5}, vkt::Initializer::glorot_uniform(), false, DType::BF16);
  const Tensor b = saved.variable("b", {5}, vkt::Initializer::constant(0.3f));
  vkt::save_checkpoint(saved, path);
  const auto file = vkt::detail::CheckpointFile::read(path);
  const vkt::detail::CheckpointEntry& entry = file.entries().at("w");
  CHECK(entry.dtype == DType::BF16);
  CHECK(entry.end - entry.begin == 15 * 2);  // two bytes each, unpadded, as safetensors stores
  CHECK(file.entries().at("b").dtype == DType::F32);

  vkt::Graph loaded(vkt::test::shared_device(), {.seed = 4});
  const Tensor w2 = loaded.variable("w", {3, 5}, vkt::Initializer::zeros(), false, DType::BF16);
  const Tensor b2 = loaded.variable("b", {5});
  vkt::load_checkpoint(loaded, path);
  CHECK(float_bits(loaded.values(w2)) == float_bits(saved.values(w)));
  CHECK(loaded.values(b2) == saved.values(b));

  // A model whose variable is f32 (or f16) takes the file's values, widened
  // (or rounded), as PyTorch's load_state_dict converts.
  vkt::Graph widened(vkt::test::shared_device());
  const Tensor w3 = widened.variable("w", {3, 5}, vkt::Initializer::zeros(), false);
  (void)widened.variable("b", {5});
  vkt::load_checkpoint(widened, path);
  CHECK(float_bits(widened.values(w3)) == float_bits(saved.values(w)));
  vkt::Graph narrowed(vkt::test::shared_device());
  const Tensor w4 = narrowed.variable("w", {3, 5}, vkt::Initializer::zeros(), false, DType::F16);
  (void)narrowed.variable("b", {5});
  vkt::load_checkpoint(narrowed, path);
  CHECK(float_bits(narrowed.values(w4)) ==
        float_bits(rounded_to_half(saved.values(w), DType::F16)));
}

TEST_CASE("half variables refuse training, another dtype under their name, and i32") {
  vkt::Graph g(vkt::test::shared_device());
  CHECK_THAT(error_of([&] {
               g.variable("w", {2, 2}, vkt::Initializer::zeros(), true, DType::BF16);
             }),
             Contains("variable 'w' is bf16 and trainable") &&
                 Contains("pass trainable = false to freeze it"));
  CHECK(g.variables().empty());
  (void)g.variable("w", {2, 2}, vkt::Initializer::zeros(), false, DType::BF16);
  CHECK_THAT(error_of([&] {
               g.variable("w", {2, 2}, vkt::Initializer::zeros(), false);
             }),
             Contains("variable 'w' already exists as bf16; it was asked for again as f32"));
  CHECK_THAT(error_of([&] { g.variable("n", {2}, vkt::Initializer::zeros(), false, DType::I32); }),
             Contains("holds f32, f16 or bf16 values, not i32"));
  // No op writes a half variable: the optimizers take trainable variables
  // alone, and an update of one as state is refused.
  const Tensor w = *g.find_variable("w");
  CHECK(g.trainable_variables().empty());
  CHECK_THAT(
      error_of([&] {
        vkt::assign_moving_average(w, g.constant({2, 2}, std::vector<float>{1, 2, 3, 4}), 0.5f);
      }),
      Contains("both tensors must be f32"));
  const Tensor x = g.input("x", {2, 2});
  const Tensor loss = vkt::reduce_sum(vkt::matmul(x, vkt::cast(w, DType::F32)));
  vkt::SGD sgd(0.1f);
  CHECK_THAT(error_of([&] { sgd.minimize(loss, std::vector<Tensor>{w}); }),
             Contains("variable 'w' is bf16, a frozen weight that no optimizer writes"));
}

namespace {

/// dense (gelu) then layer_norm on x, the layers' weights given `values` (by
/// name, each rounded to bf16 first where `round`), under `precision`: the
/// output and its gradient for x. In a FrozenScope of `frozen` when given.
Outputs frozen_layers(Precision precision, std::optional<DType> frozen,
                      std::map<std::string, std::vector<float>> values, bool round) {
  vkt::Graph g(vkt::test::shared_device(), {.precision = precision});
  const Tensor x = g.input("x", {kRows, kIn});
  Tensor y;
  {
    std::optional<vkt::FrozenScope> scope;
    if (frozen) scope.emplace(g, *frozen);
    y = vkt::layers::layer_norm(vkt::layers::dense(x, kOut, vkt::layers::Activation::Gelu, "dense"),
                                1e-5f, "norm");
  }
  const Tensor c = g.constant(y.shape(), vkt::test::random_floats(kRows * kOut, 43));
  const Tensor dx = vkt::gradients(vkt::reduce_sum(y * c), {x})[0].dense;
  vkt::Executor exec(g, {y, dx});
  for (auto& [name, v] : values) {
    g.assign(*g.find_variable(name), round ? rounded_to_half(v, DType::BF16) : v);
  }
  exec.feed("x", vkt::test::random_floats(kRows * kIn, 42, -2.0f, 2.0f));
  exec.run();
  return {exec.read(y), exec.read(dx), {}};
}

}  // namespace

TEST_CASE(
    "the layers built in a FrozenScope make frozen weights of its type, with the bits of "
    "f32 weights holding their rounded values") {
  const char* kernels = GENERATE("tiled", "texel");
  INFO(kernels);
  const vkt::test::VariantScope scope(kernels);
  const std::map<std::string, std::vector<float>> values = {
      {"dense/kernel", vkt::test::random_floats(kIn * kOut, 51, -0.9f, 0.9f)},
      {"dense/bias", vkt::test::random_floats(kOut, 52)},
      {"norm/gamma", vkt::test::random_floats(kOut, 53, 0.5f, 1.5f)},
      {"norm/beta", vkt::test::random_floats(kOut, 54)}};
  for (const Precision precision : {Precision::F32, Precision::BF16}) {
    INFO(vkt::to_string(precision));
    const Outputs frozen = frozen_layers(precision, DType::BF16, values, false);
    const Outputs f32 = frozen_layers(precision, std::nullopt, values, true);
    CHECK(float_bits(frozen.y) == float_bits(f32.y));
    CHECK(float_bits(frozen.dx) == float_bits(f32.dx));
    CHECK(float_bits(frozen.y) != float_bits(frozen_layers(precision, {}, values, false).y));
  }

  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", {kRows, kIn});
  const Tensor head_before = g.variable("head", {2});
  {
    const vkt::FrozenScope bf16(g, DType::BF16);
    (void)vkt::layers::dense(x, kOut, vkt::layers::Activation::None, "body");
    {
      const vkt::FrozenScope f32(g, DType::F32);  // nested: frozen, kept f32
      (void)g.variable("inner", {2});
    }
    (void)g.variable("after_inner", {2});
    (void)g.variable("state", {2}, vkt::Initializer::zeros(), false);  // as asked
    CHECK(g.variable("head", {2}).id() == head_before.id());           // made before: as it is
  }
  (void)g.variable("head_after", {2});
  const auto variable = [&](const char* name) { return g.variable_of(*g.find_variable(name)); };
  for (const char* name : {"body/kernel", "body/bias", "after_inner"}) {
    INFO(name);
    CHECK(variable(name).tensor.dtype() == DType::BF16);
    CHECK_FALSE(variable(name).trainable);
  }
  CHECK(variable("inner").tensor.dtype() == DType::F32);
  CHECK_FALSE(variable("inner").trainable);
  CHECK(variable("state").tensor.dtype() == DType::F32);
  for (const char* name : {"head", "head_after"}) {
    CHECK(variable(name).tensor.dtype() == DType::F32);
    CHECK(variable(name).trainable);
  }
  CHECK_THAT(error_of([&] { vkt::FrozenScope bad(g, DType::I32); }),
             Contains("FrozenScope: weights are frozen as f32, f16 or bf16, not i32"));
}
