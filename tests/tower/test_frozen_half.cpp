// A frozen half base with trainable f32 adapters (LoRA's shape) on the towers:
// the base never changes on any tower, the adapters train to the bits of a
// base held in f32 with the same values, and checkpoints, resume and warm
// start carry the base in its own type.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include <vktower/runtime/graph/half.h>
#include <vktower/runtime/io/checkpoint.h>
#include <vktower/runtime/io/checkpoint_file.h>
#include <vktower/runtime/vulkan/instance.h>
#include <vktower/tower/replicate.h>
#include <vktower/tower/tower_run.h>
#include <vktower/tower/warm_start.h>
#include <vktower/vktower.h>

#include "../graph/matmul_variant_scope.h"
#include "../mlp_fixture.h"
#include "../shared_device.h"
#include "../test_support.h"
#include "../tower_devices.h"

using vkt::DType;
using vkt::HostTensor;
using vkt::Precision;
using vkt::Tensor;
using vkt::test::float_bits;
using vkt::test::kMlpClasses;
using vkt::test::rounded_to_half;

namespace {

constexpr std::int64_t kBatch = 12, kIn = 7, kRank = 2;
const vkt::Shape kBaseShape{kIn, kMlpClasses};
const std::vector<std::string> kAdapters = {"adapter/down/kernel", "adapter/down/bias",
                                            "adapter/up/kernel", "adapter/up/bias"};

/// The base's values: not half values, so a missing rounding shows.
std::vector<float> base_values() {
  return vkt::test::random_floats(static_cast<std::size_t>(kIn * kMlpClasses), 61, -0.7f, 0.7f);
}

/// logits = x base + up(down(x)): the frozen base "base/kernel" of
/// `base_dtype` made from `base`, a rank-2 adapter trained by Adam.
vkt::ModelFn lora_model(DType base_dtype, std::vector<float> base) {
  return [=](vkt::ModelContext& ctx, const vkt::TensorDict& f, const vkt::TensorDict& l,
             vkt::Mode mode, const vkt::Params&) {
    const Tensor w = ctx.graph().variable(
        "base/kernel", kBaseShape,
        vkt::Initializer::from_values(HostTensor::floats(kBaseShape, base)), false, base_dtype);
    const Tensor x = f.at("x");
    const Tensor down = vkt::layers::dense(x, kRank, vkt::layers::Activation::None, "adapter/down");
    const Tensor up =
        vkt::layers::dense(down, kMlpClasses, vkt::layers::Activation::None, "adapter/up");
    return vkt::test::adam_mlp_spec(vkt::matmul(x, vkt::cast(w, DType::F32)) + up, l, mode);
  };
}

/// A model trained on `towers` towers of the test case's devices.
struct Run {
  vkt::Instance instance;
  vkt::ModelContext root{
      instance, {{"x", {{kBatch, kIn}}}}, {{"y", {{kBatch}, vkt::DType::I32}}}, {.seed = 9}};
  vkt::EstimatorSpec spec;
  Run(const vkt::ModelFn& model, int towers, vkt::VariableMode mode, Precision precision) {
    const auto replicated = vkt::replicate_model_fn(
        model, {.devices = std::vector<std::uint32_t>(static_cast<std::size_t>(towers), 0),
                .variable_mode = mode,
                .precision = precision,
                .loss_scaling = vkt::LossScaling::Off});
    root.set_device_pool(&vkt::test::tower_devices());
    spec = replicated(root, {}, {}, vkt::Mode::Train, {});
  }
  vkt::TowerRun& run() { return *spec.run; }
  void train(const vkt::test::MlpBatches& data, std::size_t from = 0,
             std::size_t to = std::size_t(-1)) {
    for (std::size_t s = from; s < std::min(to, data.xs.size()); ++s) {
      spec.run->train_step(data.xs[s], data.ys[s]);
    }
  }
  /// The base as each tower's graph holds it.
  std::vector<std::vector<float>> tower_bases() {
    std::vector<std::vector<float>> out;
    for (int t = 0; t < spec.run->towers(); ++t) {
      vkt::Graph& g = spec.run->tower_graph(t);
      out.push_back(g.values(*g.find_variable("base/kernel")));
    }
    return out;
  }
  /// The adapters' values, then the last loss.
  std::vector<std::vector<float>> adapters() {
    std::vector<std::vector<float>> out;
    for (const std::string& name : kAdapters) out.push_back(spec.run->variable(name));
    out.push_back({spec.run->loss()});
    return out;
  }
};

/// Every value of `a` against `b`, bit for bit.
bool same_bits(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (float_bits(a[i]) != float_bits(b[i])) return false;
  }
  return true;
}

}  // namespace

TEST_CASE(
    "a frozen half base with f32 adapters trains on the towers to the bits of an f32 base "
    "of the same values, and the base never changes on any tower",
    "[frozen-half]") {
  const char* kernels = GENERATE("tiled", "texel");
  INFO(kernels);
  const vkt::test::VariantScope scope(kernels);
  const vkt::test::MlpBatches data(8, 7, kBatch, kIn);
  for (const DType dtype : {DType::F16, DType::BF16}) {
    const std::vector<float> frozen = rounded_to_half(base_values(), dtype);
    for (const Precision precision : {Precision::F32, Precision::BF16}) {
      INFO(vkt::to_string(dtype) << " base, " << vkt::to_string(precision));
      Run half(lora_model(dtype, base_values()), 1, {}, precision);
      const auto initial = half.adapters();
      half.train(data);
      Run f32(lora_model(DType::F32, frozen), 1, {}, precision);
      f32.train(data);
      const auto trained = half.adapters();
      CHECK(same_bits(trained, f32.adapters()));
      CHECK(float_bits(trained[2]) != float_bits(initial[2]));  // the adapters trained
      for (const auto& base : half.tower_bases()) CHECK(float_bits(base) == float_bits(frozen));
      CHECK(float_bits(half.run().variable("base/kernel")) == float_bits(frozen));
    }
  }
  // 2 towers in every variable mode: the same against an f32 base in that mode.
  for (const auto mode : {vkt::VariableMode::SharedLocalParameterServer,
                          vkt::VariableMode::Mirrored, vkt::VariableMode::RoundRobin}) {
    INFO("variable mode " << static_cast<int>(mode));
    const std::vector<float> frozen = rounded_to_half(base_values(), DType::BF16);
    Run half(lora_model(DType::BF16, base_values()), 2, mode, Precision::BF16);
    half.train(data);
    Run f32(lora_model(DType::F32, frozen), 2, mode, Precision::BF16);
    f32.train(data);
    CHECK(same_bits(half.adapters(), f32.adapters()));
    const auto bases = half.tower_bases();
    CHECK(bases.size() == 2);
    for (const auto& base : bases) CHECK(float_bits(base) == float_bits(frozen));
  }
}

TEST_CASE("the weights' copy-back to the towers leaves the frozen half base out", "[frozen-half]") {
  const vkt::test::MlpBatches data(2, 9, kBatch, kIn);
  for (const auto mode :
       {vkt::VariableMode::SharedLocalParameterServer, vkt::VariableMode::RoundRobin}) {
    INFO("variable mode " << static_cast<int>(mode));
    Run run(lora_model(DType::BF16, base_values()), 2, mode, Precision::F32);
    run.train(data, 0, 1);
    // Tower 1's own copy changed behind the run's back: a copy-back that
    // sent the base would put the master's over it.
    vkt::Graph& tower1 = run.run().tower_graph(1);
    const std::vector<float> marked(static_cast<std::size_t>(kBaseShape.elements()), 0.375f);
    tower1.assign(*tower1.find_variable("base/kernel"), marked);
    run.train(data, 1);
    CHECK(run.tower_bases()[1] == marked);
    CHECK(float_bits(run.tower_bases()[0]) ==
          float_bits(rounded_to_half(base_values(), DType::BF16)));
    // The trainable weights did arrive.
    for (const std::string& name : kAdapters) {
      CHECK(tower1.values(*tower1.find_variable(name)) == run.run().variable(name));
    }
  }
}

TEST_CASE(
    "a run with a frozen half base resumes from its checkpoint bit for bit, the base "
    "stored in its type",
    "[frozen-half]") {
  const vkt::test::MlpBatches data(8, 8, kBatch, kIn);
  vkt::test::TempDir dir;
  for (const auto mode : {vkt::VariableMode::SharedLocalParameterServer,
                          vkt::VariableMode::Mirrored, vkt::VariableMode::RoundRobin}) {
    INFO("variable mode " << static_cast<int>(mode));
    const auto model = lora_model(DType::BF16, base_values());
    Run whole(model, 2, mode, Precision::BF16);
    whole.train(data);
    whole.run().save(dir / "whole.safetensors");

    {
      Run first(model, 2, mode, Precision::BF16);
      first.train(data, 0, 4);
      first.run().save(dir / "half_way.safetensors");
    }
    const auto file = vkt::detail::CheckpointFile::read(dir / "half_way.safetensors");
    const vkt::detail::CheckpointEntry& base = file.entries().at("base/kernel");
    CHECK(base.dtype == DType::BF16);
    CHECK(base.end - base.begin == static_cast<std::uint64_t>(kBaseShape.elements()) * 2);

    // Resumed by a run whose base starts elsewhere: the file's base wins.
    Run resumed(lora_model(DType::BF16, std::vector<float>(base_values().size(), 0.5f)), 2, mode,
                Precision::BF16);
    resumed.run().restore(dir / "half_way.safetensors");
    resumed.train(data, 4);
    resumed.run().save(dir / "resumed.safetensors");
    // Every variable, the adapters' Adam slots included.
    const auto expected = vkt::read_checkpoint(dir / "whole.safetensors");
    const auto actual = vkt::read_checkpoint(dir / "resumed.safetensors");
    REQUIRE(actual.size() == expected.size());
    for (const auto& [name, tensor] : expected) {
      INFO(name);
      CHECK(float_bits(actual.at(name).f32) == float_bits(tensor.f32));
    }
    for (const auto& b : resumed.tower_bases()) {
      CHECK(float_bits(b) == float_bits(rounded_to_half(base_values(), DType::BF16)));
    }
  }
}

TEST_CASE("warm start fills a frozen half base from another model's f32 or half tensor",
          "[frozen-half][warm-start]") {
  vkt::test::TempDir dir;
  const std::vector<float> pretrained =
      vkt::test::random_floats(static_cast<std::size_t>(kBaseShape.elements()), 62, -0.5f, 0.5f);
  // The pretrained model's file: the base in f32, and in f16 under another name.
  {
    vkt::Graph g(vkt::test::shared_device());
    const Tensor f32 = g.variable("encoder/w", kBaseShape);
    const Tensor f16 =
        g.variable("encoder/w16", kBaseShape, vkt::Initializer::zeros(), false, DType::F16);
    g.assign(f32, pretrained);
    g.assign(f16, pretrained);
    vkt::save_checkpoint(g, dir / "pretrained.safetensors");
  }
  for (const char* source : {"encoder/w", "encoder/w16"}) {
    INFO(source);
    Run run(lora_model(DType::BF16, base_values()), 2, vkt::VariableMode::Mirrored,
            Precision::BF16);
    vkt::warm_start(run.run(), {.ckpt_to_initialize_from = dir / "pretrained.safetensors",
                                .vars_to_warm_start = "base/",
                                .var_name_to_prev_var_name = {{"base/kernel", source}}});
    // Rounded to bf16 from the file's values (the f16 tensor's own rounding first).
    const std::vector<float> file_values =
        std::string(source) == "encoder/w" ? pretrained : rounded_to_half(pretrained, DType::F16);
    for (const auto& b : run.tower_bases()) {
      CHECK(float_bits(b) == float_bits(rounded_to_half(file_values, DType::BF16)));
    }
  }
}

TEST_CASE("warm start fills a FrozenScope's f32 body but not a frozen variable made as state",
          "[frozen-half][warm-start]") {
  const auto model = [](vkt::ModelContext& ctx, const vkt::TensorDict& f, const vkt::TensorDict& l,
                        vkt::Mode mode, const vkt::Params&) {
    Tensor h;
    {
      const vkt::FrozenScope frozen(ctx.graph());  // f32
      h = vkt::layers::dense(f.at("x"), 4, vkt::layers::Activation::Tanh, "body");
    }
    // trainable = false outside a scope: state, as a moving average is.
    const Tensor state = ctx.graph().variable("state", {4}, vkt::Initializer::zeros(), false);
    const Tensor logits =
        vkt::layers::dense(h + state, kMlpClasses, vkt::layers::Activation::None, "head");
    return vkt::test::adam_mlp_spec(logits, l, mode);
  };
  vkt::test::TempDir dir;
  std::map<std::string, std::vector<float>> pretrained;
  {
    vkt::Graph g(vkt::test::shared_device());
    const std::map<std::string, vkt::Shape> shapes = {{"body/kernel", {kIn, 4}},
                                                      {"body/bias", {4}},
                                                      {"head/kernel", {4, kMlpClasses}},
                                                      {"head/bias", {kMlpClasses}},
                                                      {"state", {4}}};
    for (const auto& [name, shape] : shapes) g.variable(name, shape);
    std::uint32_t seed = 80;
    for (const auto& [name, shape] : shapes) {
      pretrained[name] =
          vkt::test::random_floats(static_cast<std::size_t>(shape.elements()), ++seed);
      g.assign(*g.find_variable(name), pretrained[name]);
    }
    vkt::save_checkpoint(g, dir / "pretrained.safetensors");
  }
  Run run(model, 2, vkt::VariableMode::SharedLocalParameterServer, Precision::F32);
  vkt::warm_start(run.run(), {.ckpt_to_initialize_from = dir / "pretrained.safetensors"});
  for (const char* name : {"body/kernel", "body/bias", "head/kernel", "head/bias"}) {
    INFO(name);
    CHECK(float_bits(run.run().variable(name)) == float_bits(pretrained.at(name)));
    for (int t = 0; t < run.run().towers(); ++t) {
      vkt::Graph& g = run.run().tower_graph(t);
      CHECK(float_bits(g.values(*g.find_variable(name))) == float_bits(pretrained.at(name)));
    }
  }
  CHECK(run.run().variable("state") == std::vector<float>(4, 0.0f));
}

TEST_CASE(
    "a body built in a FrozenScope trains its head on 2 towers as an f32 frozen body "
    "holding the rounded weights",
    "[frozen-half]") {
  const vkt::test::MlpBatches data(6, 10, kBatch, kIn);
  const auto model = [](DType body) -> vkt::ModelFn {
    return [body](vkt::ModelContext& ctx, const vkt::TensorDict& f, const vkt::TensorDict& l,
                  vkt::Mode mode, const vkt::Params&) {
      Tensor h;
      {
        const vkt::FrozenScope frozen(ctx.graph(), body);
        h = vkt::layers::layer_norm(
            vkt::layers::dense(f.at("x"), 8, vkt::layers::Activation::Tanh, "body"), 1e-5f,
            "body_norm");
      }
      const Tensor logits =
          vkt::layers::dense(h, kMlpClasses, vkt::layers::Activation::None, "head");
      return vkt::test::adam_mlp_spec(logits, l, mode);
    };
  };
  const std::map<std::string, std::vector<float>> body = {
      {"body/kernel", vkt::test::random_floats(kIn * 8, 71, -0.6f, 0.6f)},
      {"body/bias", vkt::test::random_floats(8, 72)},
      {"body_norm/gamma", vkt::test::random_floats(8, 73, 0.5f, 1.5f)},
      {"body_norm/beta", vkt::test::random_floats(8, 74)}};
  for (const auto mode :
       {vkt::VariableMode::SharedLocalParameterServer, vkt::VariableMode::Mirrored}) {
    INFO("variable mode " << static_cast<int>(mode));
    const auto trained = [&](DType dtype) {
      Run run(model(dtype), 2, mode, Precision::BF16);
      for (const auto& [name, values] : body)
        run.run().assign(name, rounded_to_half(values, DType::BF16));
      const auto before = run.run().variable("body/kernel");
      run.train(data);
      CHECK(run.run().variable("body/kernel") == before);  // frozen
      std::vector<std::vector<float>> out;
      for (const char* name : {"head/kernel", "head/bias"}) out.push_back(run.run().variable(name));
      return out;
    };
    const auto half = trained(DType::BF16);
    CHECK(same_bits(half, trained(DType::F32)));
  }
}

TEST_CASE(
    "a LoRA fine-tune: warm start fills lora_dense's bf16 base from a pretrained dense layer, "
    "only the adapters train, to the bits of an f32 base, and 2 towers near 1",
    "[frozen-half][warm-start]") {
  const vkt::test::MlpBatches data(6, 13, kBatch, kIn);
  const auto model = [](DType base) -> vkt::ModelFn {
    return [base](vkt::ModelContext&, const vkt::TensorDict& f, const vkt::TensorDict& l,
                  vkt::Mode mode, const vkt::Params&) {
      const Tensor h =
          vkt::layers::lora_dense(f.at("x"), 8, {.rank = 2, .alpha = 4, .base_dtype = base},
                                  vkt::layers::Activation::Tanh, "hidden");
      return vkt::test::adam_mlp_spec(
          vkt::layers::dense(h, kMlpClasses, vkt::layers::Activation::None, "head"), l, mode);
    };
  };
  vkt::test::TempDir dir;
  const std::vector<float> kernel = vkt::test::random_floats(kIn * 8, 91, -0.6f, 0.6f);
  const std::vector<float> bias = vkt::test::random_floats(8, 92);
  // The pretrained model's file: a plain dense layer "hidden".
  const auto save_pretrained = [&](const std::vector<float>& k, const std::vector<float>& b) {
    vkt::Graph g(vkt::test::shared_device());
    vkt::layers::dense(g.input("x", {kBatch, kIn}), 8, vkt::layers::Activation::Tanh, "hidden");
    g.assign(*g.find_variable("hidden/kernel"), k);
    g.assign(*g.find_variable("hidden/bias"), b);
    vkt::save_checkpoint(g, dir / "pretrained.safetensors");
  };
  save_pretrained(kernel, bias);
  const auto fine_tuned = [&](DType base, int towers) {
    Run run(model(base), towers, vkt::VariableMode::SharedLocalParameterServer, Precision::BF16);
    vkt::warm_start(run.run(), {.ckpt_to_initialize_from = dir / "pretrained.safetensors",
                                .vars_to_warm_start = "hidden/(kernel|bias)"});
    run.train(data);
    for (int t = 0; t < towers; ++t) {
      vkt::Graph& g = run.run().tower_graph(t);
      CHECK(float_bits(g.values(*g.find_variable("hidden/kernel"))) ==
            float_bits(rounded_to_half(kernel, DType::BF16)));
    }
    std::vector<std::vector<float>> out;
    for (const char* name : {"hidden/lora_a", "hidden/lora_b", "head/kernel", "head/bias"}) {
      out.push_back(run.run().variable(name));
    }
    out.push_back({run.run().loss()});
    return out;
  };
  const auto half = fine_tuned(DType::BF16, 2);
  CHECK(half[1] != std::vector<float>(2 * 8, 0.0f));  // lora_b trained from zeros
  // An f32 base warm-started from the same file rounds nothing: bf16 values
  // in the file make it hold what the bf16 base holds.
  save_pretrained(rounded_to_half(kernel, DType::BF16), rounded_to_half(bias, DType::BF16));
  CHECK(same_bits(half, fine_tuned(DType::BF16, 2)));
  CHECK(same_bits(half, fine_tuned(DType::F32, 2)));
  // 1 tower sums its gradient in another order than 2, and rounds other
  // products to bf16: near, not equal.
  const auto one = fine_tuned(DType::BF16, 1);
  for (std::size_t i = 0; i < half.size(); ++i) {
    INFO("value " << i);
    CHECK(vkt::test::norm_relative(one[i], half[i]) < 5e-3);  // 1.9e-3 at most, lora_b
  }
}
