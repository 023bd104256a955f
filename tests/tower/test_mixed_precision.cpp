// The mixed-precision policy (ReplicateOptions::precision): an MLP's products
// in f16 and bf16 on 1 and 2 towers, against each other and against f32.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include <vktower/runtime/graph/half.h>
#include <vktower/runtime/vulkan/instance.h>
#include <vktower/tower/replicate.h>
#include <vktower/tower/tower_run.h>

#include "../graph/matmul_variant_scope.h"
#include "../mlp_fixture.h"
#include "../test_support.h"
#include "../tower_devices.h"

using Catch::Matchers::Contains;
using vkt::HostBatch;
using vkt::HostTensor;
using vkt::Precision;
using vkt::Tensor;

namespace {

constexpr std::int64_t kBatch = 12, kIn = 7, kSteps = 20;

struct Batches : vkt::test::MlpBatches {
  explicit Batches(int steps = kSteps) : MlpBatches(steps, 5, kBatch, kIn) {}
};

/// Every variable after the data's steps (kSteps unless given), then the last loss.
/// Loss scaling is off unless asked for: these runs test the policy alone.
/// `model`: adam_mlp unless given (or one of its variants).
std::vector<std::vector<float>> train(const Batches& data, int towers, Precision precision,
                                      vkt::VariableMode mode = {},
                                      vkt::LossScaling scaling = vkt::LossScaling::Off,
                                      vkt::DType exchange = vkt::DType::F32,
                                      const vkt::ModelFn& model = {}) {
  vkt::Instance instance;
  const auto replicated = vkt::replicate_model_fn(model ? model : vkt::test::adam_mlp,
                                                  {.devices = std::vector<std::uint32_t>(towers, 0),
                                                   .variable_mode = mode,
                                                   .precision = precision,
                                                   .loss_scaling = scaling,
                                                   .exchange_dtype = exchange});
  vkt::ModelContext root(instance, {{"x", {{kBatch, kIn}}}}, {{"y", {{kBatch}, vkt::DType::I32}}},
                         {.seed = 9});
  root.set_device_pool(&vkt::test::tower_devices());
  vkt::EstimatorSpec spec = replicated(root, {}, {}, vkt::Mode::Train, {});
  // The policy reached the towers: their products' operands are cast to the
  // half type (or, on the texel kernel, rounded to it in place).
  std::int64_t half_casts = 0;
  for (const vkt::Node& node : spec.run->tower_graph(towers - 1).nodes()) {
    half_casts += (node.op->type() == "cast" && node.output.dtype() != vkt::DType::F32) ||
                  node.op->type().rfind("round_", 0) == 0;
  }
  if (!model) CHECK((half_casts > 0) == (precision != Precision::F32));
  for (std::size_t s = 0; s < data.xs.size(); ++s) spec.run->train_step(data.xs[s], data.ys[s]);
  std::vector<std::vector<float>> out;
  for (const char* name : {"hidden/kernel", "hidden/bias", "out/kernel", "out/bias"}) {
    out.push_back(spec.run->variable(name));
  }
  out.push_back({spec.run->loss()});
  return out;
}

/// The largest difference between two runs' values, over the largest value.
double relative_distance(const std::vector<std::vector<float>>& a,
                         const std::vector<std::vector<float>>& b) {
  double diff = 0, scale = 0;
  for (std::size_t v = 0; v < a.size(); ++v) {
    for (std::size_t i = 0; i < a[v].size(); ++i) {
      diff = std::max<double>(diff, std::abs(a[v][i] - b[v][i]));
      scale = std::max<double>(scale, std::abs(a[v][i]));
    }
  }
  return diff / scale;
}

}  // namespace

TEST_CASE(
    "an MLP trained in fp16 and bf16: the same bits run to run, 2 towers within the half "
    "rounding of 1, and within a stated distance of fp32") {
  const Batches data;
  // The half kernel (tiled: GPUs) and, on CPU devices, the texel kernel on
  // operands widened to f32: the same arithmetic, other summation orders.
  const char* kernels = GENERATE("tiled", "texel");
  INFO(kernels);
  const vkt::test::VariantScope scope(kernels);
  const auto fp32 = train(data, 1, Precision::F32);
  for (const Precision precision : {Precision::F16, Precision::BF16}) {
    INFO(vkt::to_string(precision));
    // The half type's unit roundoff: each tower rounds its shard's weight
    // gradient once, so 2 towers differ from 1 by about that much a step.
    const double u = precision == Precision::F16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
    const auto one = train(data, 1, precision);
    CHECK(train(data, 1, precision) == one);
    for (const auto mode : {vkt::VariableMode::SharedLocalParameterServer,
                            vkt::VariableMode::Mirrored, vkt::VariableMode::RoundRobin}) {
      INFO("variable mode " << static_cast<int>(mode));
      const double towers = relative_distance(one, train(data, 2, precision, mode));
      UNSCOPED_INFO("2 towers against 1: " << towers);
      CHECK(towers <= u / 2);
    }
    // Against f32: 20 Adam steps on products rounded to the half type.
    const double from_fp32 = relative_distance(fp32, one);
    UNSCOPED_INFO("against fp32: " << from_fp32);
    CHECK(from_fp32 <= u);
    // With dynamic loss scaling (fp16's default), 50 steps: as close.
    if (precision == Precision::F16) {
      const Batches longer(50);
      const double scaled =
          relative_distance(train(longer, 1, Precision::F32),
                            train(longer, 1, precision, {}, vkt::LossScaling::Dynamic));
      UNSCOPED_INFO("loss-scaled against fp32 after 50 steps: " << scaled);
      CHECK(scaled <= u);
    }
    CHECK(std::abs(one.back()[0] - fp32.back()[0]) <= u * fp32.back()[0]);
  }
}

TEST_CASE("a half precision on a device without 16-bit storage names the device and the fix") {
  vkt::Instance instance;
  const auto replicated = vkt::replicate_model_fn(
      vkt::test::adam_mlp, {.devices = {0},
                            .precision = Precision::F16,
                            .device_options = vkt::DeviceOptions{.disable_16bit_storage = true}});
  vkt::ModelContext root(instance, {{"x", {{kBatch, kIn}}}}, {{"y", {{kBatch}, vkt::DType::I32}}});
  root.set_device_pool(&vkt::test::tower_devices());
  const std::string error =
      vkt::test::error_of([&] { (void)replicated(root, {}, {}, vkt::Mode::Train, {}); });
  CHECK_THAT(error, Contains("fp16") && Contains("device 0") && Contains("16-bit storage") &&
                        Contains("--precision fp32"));
  CHECK_THAT(vkt::test::error_of([] { (void)vkt::parse_precision("half", "--precision"); }),
             Contains("--precision") && Contains("'half'") && Contains("fp32, fp16 or bf16"));
}

TEST_CASE(
    "gradients exchanged in f16 and bf16: the same bits run to run, in the parameter-server "
    "modes alike, Mirrored's sums rounded on the way back too, and within a stated distance of "
    "the f32 exchange") {
  const Batches data;
  const auto f32 = train(data, 2, Precision::F32);
  for (const vkt::DType exchange : {vkt::DType::F16, vkt::DType::BF16}) {
    INFO(vkt::to_string(exchange));
    const double u = exchange == vkt::DType::F16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
    const auto run = [&](vkt::VariableMode mode) {
      return train(data, 2, Precision::F32, mode, vkt::LossScaling::Off, exchange);
    };
    const auto half = run(vkt::VariableMode::SharedLocalParameterServer);
    CHECK(run(vkt::VariableMode::SharedLocalParameterServer) == half);
    // Both sum the same rounded gradients in the same order and update from the f32 sum.
    CHECK(run(vkt::VariableMode::RoundRobin) == half);
    // Mirrored sends the sum back to every tower in the half type as well:
    // each replica is updated with the sum rounded once more, so not the
    // bits of the modes whose update reads the f32 sum.
    const auto mirrored = run(vkt::VariableMode::Mirrored);
    CHECK(run(vkt::VariableMode::Mirrored) == mirrored);
    CHECK(mirrored != half);
    // Each tower's gradients rounded once a step (and Mirrored's sums once
    // more): 20 Adam steps move the weights by less than a quarter of the half
    // type's unit roundoff of the largest (measured: 2.1e-5 in f16, 2.7e-4 in
    // bf16; Mirrored 2.4e-5 and 2.8e-4).
    for (const auto* values : {&half, &mirrored}) {
      const double distance = relative_distance(f32, *values);
      UNSCOPED_INFO("against the f32 exchange: " << distance);
      CHECK(distance > 0);
      CHECK(distance <= u / 4);
    }
  }
  CHECK_THAT(vkt::test::error_of([&] {
               train(data, 2, Precision::F32, {}, vkt::LossScaling::Off, vkt::DType::I32);
             }),
             Contains("exchange_dtype is i32") && Contains("--exchange-dtype"));
}

TEST_CASE(
    "weights copied to the towers in f16 and bf16: each tower holds the master's f32 weights "
    "rounded, the rest exact, the same bits run to run, near the f32 copies") {
  const Batches data;
  vkt::Instance instance;
  // The master's weights and tower 1's copies after kSteps, with fp16 loss
  // scaling on (its scale, 2^16, is past f16's range: it must travel in f32).
  const auto run = [&](vkt::DType copies) {
    const auto replicated =
        vkt::replicate_model_fn(vkt::test::adam_mlp, {.devices = {0, 0},
                                                      .loss_scaling = vkt::LossScaling::Dynamic,
                                                      .weight_copy_dtype = copies});
    vkt::ModelContext root(instance, {{"x", {{kBatch, kIn}}}}, {{"y", {{kBatch}, vkt::DType::I32}}},
                           {.seed = 9});
    root.set_device_pool(&vkt::test::tower_devices());
    vkt::EstimatorSpec spec = replicated(root, {}, {}, vkt::Mode::Train, {});
    for (std::size_t s = 0; s < data.xs.size(); ++s) spec.run->train_step(data.xs[s], data.ys[s]);
    std::vector<std::vector<float>> master, tower;
    vkt::Graph& g = spec.run->tower_graph(1);
    for (const char* name :
         {"hidden/kernel", "hidden/bias", "out/kernel", "out/bias", "loss_scale/scale"}) {
      master.push_back(spec.run->variable(name));
      tower.push_back(g.values(*g.find_variable(name)));
    }
    return std::pair{master, tower};
  };
  const auto [f32_master, f32_tower] = run(vkt::DType::F32);
  CHECK(f32_tower == f32_master);
  for (const vkt::DType half : {vkt::DType::F16, vkt::DType::BF16}) {
    INFO(vkt::to_string(half));
    const auto [master, tower] = run(half);
    CHECK(run(half).first == master);
    for (std::size_t v = 0; v < 4; ++v) {
      INFO("variable " << v);
      CHECK(tower[v] == vkt::from_half(vkt::to_half(master[v], half), half));
      CHECK(tower[v] != master[v]);
    }
    CHECK(tower[4] == std::vector<float>{65536.0f});  // the loss scale, exact
    const double u = half == vkt::DType::F16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
    const double distance = relative_distance(f32_master, master);
    UNSCOPED_INFO("the master against the f32 copies' run: " << distance);
    CHECK(distance > 0);
    CHECK(distance <= u);
  }
  const auto replicated = vkt::replicate_model_fn(
      vkt::test::adam_mlp, {.devices = {0, 0}, .weight_copy_dtype = vkt::DType::I32});
  vkt::ModelContext root(instance, {{"x", {{kBatch, kIn}}}}, {{"y", {{kBatch}, vkt::DType::I32}}});
  root.set_device_pool(&vkt::test::tower_devices());
  CHECK_THAT(vkt::test::error_of([&] { (void)replicated(root, {}, {}, vkt::Mode::Train, {}); }),
             Contains("weight_copy_dtype is i32") && Contains("--weight-copy-dtype"));
}

TEST_CASE(
    "layers in a PrecisionScope train on the towers under the scope's precision, whatever "
    "ReplicateOptions::precision says") {
  const Batches data;
  const char* kernels = GENERATE("tiled", "texel");
  INFO(kernels);
  const vkt::test::VariantScope scope(kernels);
  for (const int towers : {1, 2}) {
    INFO(towers << " towers");
    // f32 layers in an fp16 model, its loss scaled (by powers of two, so
    // exactly): fp32's bits. Built under fp16, the gradients would round.
    CHECK(train(data, towers, Precision::F16, {}, vkt::LossScaling::Dynamic, vkt::DType::F32,
                vkt::test::adam_mlp_scoped(Precision::F32)) == train(data, towers, Precision::F32));
    // bf16 layers in an f32 model: bf16's bits.
    CHECK(train(data, towers, Precision::F32, {}, vkt::LossScaling::Off, vkt::DType::F32,
                vkt::test::adam_mlp_scoped(Precision::BF16)) ==
          train(data, towers, Precision::BF16));
  }
}
