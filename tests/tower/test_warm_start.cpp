// Starting from given values: Initializer::from_values, and the Estimator's
// warm start (RunConfig::warm_start_from) from a file written byte by byte here
// and from another model's checkpoint, with a name map; slots fresh, step 0.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>

#include <vktower/optimizers/adam.h>
#include <vktower/optimizers/tower_optimizer.h>
#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/tower/estimator.h>
#include <vktower/tower/replicate.h>

#include <vktower/runtime/graph/half.h>
#include <vktower/runtime/io/checkpoint.h>

#include "../shared_device.h"
#include "../test_support.h"
#include "../tower_devices.h"

using Catch::Matchers::Contains;
using vkt::HostTensor;
using vkt::Initializer;
using vkt::Tensor;
using vkt::test::error_of;
using vkt::test::TempDir;

namespace {

constexpr std::int64_t kFeatures = 6, kClasses = 3;

vkt::Dataset make_data() {
  const std::int64_t rows = 32;
  const std::vector<float> x =
      vkt::test::random_floats(static_cast<std::size_t>(rows * kFeatures), 21, -2.0f, 2.0f);
  std::vector<std::int32_t> y(static_cast<std::size_t>(rows));
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<std::int32_t>((i * 5) % 3);
  return vkt::Dataset(
      {{"x", HostTensor::floats({rows, kFeatures}, x)}, {"y", HostTensor::ints({rows}, y)}});
}

vkt::InputFn input(const vkt::Dataset& data) {
  return vkt::dataset_input(
      data, {.batch_size = 8, .epochs = 0, .shuffle_seed = 2, .drop_remainder = true});
}

vkt::RunConfig quiet(const std::string& dir) {
  return vkt::test::quiet_config(dir, 4);
}

/// Dense layers named `names` (the last one the logits), trained with Adam at
/// `lr`. A layer whose kernel and bias are in `given` starts from those values.
vkt::ModelFn mlp(std::vector<std::pair<std::string, std::int64_t>> layers, float lr,
                 std::map<std::string, HostTensor> given = {}, int towers = 1,
                 vkt::VariableMode mode = vkt::VariableMode::SharedLocalParameterServer) {
  const auto model = [=](vkt::ModelContext& ctx, const vkt::TensorDict& f, const vkt::TensorDict& l,
                         vkt::Mode m, const vkt::Params&) {
    Tensor h = f.at("x");
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const auto& [name, units] = layers[i];
      for (const char* part : {"/kernel", "/bias"}) {  // made first, in dense()'s order
        const auto found = given.find(name + part);
        if (found == given.end()) continue;
        ctx.graph().variable(found->first, found->second.shape,
                             Initializer::from_values(found->second));
      }
      const bool last = i + 1 == layers.size();
      h = vkt::layers::dense(
          h, units, last ? vkt::layers::Activation::None : vkt::layers::Activation::Relu, name);
    }
    vkt::EstimatorSpec spec{.mode = m};
    spec.predictions = {{"logits", h}};
    if (m == vkt::Mode::Predict) return spec;
    spec.loss = vkt::sparse_softmax_cross_entropy(l.at("y"), h, ctx.example_weights(),
                                                  vkt::Reduction::Mean);
    vkt::TowerOptimizer adam([lr] { return std::make_unique<vkt::Adam>(lr); });
    spec.train_op = adam.minimize(spec.loss);
    return spec;
  };
  return vkt::replicate_model_fn(
      model, {.devices = std::vector<std::uint32_t>(static_cast<std::size_t>(towers), 0),
              .variable_mode = mode});
}

void append_le(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

/// A safetensors file as another program writes it, byte by byte: a u64
/// little-endian header length, the JSON header (a free-form __metadata__, no
/// vktower fields), then each tensor's values in order: f32, or for the
/// names in `half` that type's bits ("F16" or "BF16", rounded by half.h).
void write_checkpoint(const std::string& path,
                      const std::vector<std::pair<std::string, HostTensor>>& tensors,
                      const std::map<std::string, std::string>& half = {}) {
  std::string data, entries;
  for (const auto& [name, t] : tensors) {
    const std::size_t begin = data.size();
    const auto type = half.find(name);
    if (type == half.end()) {
      for (const float v : t.f32) append_le(data, std::bit_cast<std::uint32_t>(v), 4);
    } else {
      const vkt::DType dtype = type->second == "F16" ? vkt::DType::F16 : vkt::DType::BF16;
      for (const std::uint16_t b : vkt::to_half(t.f32, dtype)) append_le(data, b, 2);
    }
    entries += fmt::format(",\"{}\":{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
                           name, type == half.end() ? "F32" : type->second,
                           fmt::join(t.shape.dims(), ","), begin, data.size());
  }
  const std::string header = fmt::format("{{\"__metadata__\":{{\"format\":\"pt\"}}{}}}", entries);
  std::string file;
  append_le(file, header.size(), 8);
  file += header + data;
  std::ofstream(path, std::ios::binary) << file;
}

HostTensor counting(vkt::Shape shape, float scale) {
  std::vector<float> v(static_cast<std::size_t>(shape.elements()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = scale * (static_cast<float>(i) - 5.5f);
  return HostTensor::floats(shape, v);
}

}  // namespace

TEST_CASE(
    "Initializer::from_values gives a variable exactly its values, and another shape or i32 values "
    "are errors",
    "[initializer][warm-start]") {
  vkt::Graph g(vkt::test::shared_device(), {.seed = 3});
  const HostTensor given = HostTensor::floats({2, 3}, {1.5f, -2.0f, 0.1f, 3e-8f, 7.0f, -1e30f});
  const Tensor w = g.variable("w", {2, 3}, Initializer::from_values(given));
  const Tensor other = g.variable("other", {4}, Initializer::ones());
  CHECK(g.values(w) == given.f32);
  CHECK(g.values(other) == std::vector<float>(4, 1.0f));
  CHECK(Initializer::from_values(given).str() == "values([2, 3])");

  vkt::Graph h(vkt::test::shared_device());
  CHECK_THAT(error_of([&] {
               h.variable("dense/kernel", {3, 2}, Initializer::from_values(given));
             }),
             Contains("'dense/kernel'") && Contains("[3, 2]") && Contains("[2, 3]"));
  CHECK_FALSE(h.find_variable("dense/kernel"));  // nothing was made
  CHECK_THAT(error_of([&] {
               Initializer::from_values(HostTensor::ints({2}, {1, 2}));
             }),
             Contains("i32"));
}

TEST_CASE(
    "warm start from a file written byte by byte: the picked variables take its values, the "
    "rest and the slots start fresh, the step at 0, on 1 and 2 towers in every variable mode",
    "[estimator][warm-start]") {
  const vkt::Dataset data = make_data();
  TempDir files;
  const HostTensor kernel = counting({kFeatures, 4}, 0.03f);
  const HostTensor bias = counting({4}, 0.01f);
  const std::string file = files / "given.safetensors";
  // The file also holds a tensor the model does not have: ignored.
  write_checkpoint(
      file, {{"hidden/kernel", kernel}, {"hidden/bias", bias}, {"unrelated", counting({2}, 1.0f)}});
  const std::vector<std::pair<std::string, std::int64_t>> layers = {{"hidden", 4},
                                                                    {"out", kClasses}};
  struct Case {
    int towers;
    vkt::VariableMode mode;
  };
  for (const Case c :
       {Case{1, vkt::VariableMode::SharedLocalParameterServer},
        Case{2, vkt::VariableMode::SharedLocalParameterServer},
        Case{2, vkt::VariableMode::Mirrored}, Case{2, vkt::VariableMode::RoundRobin}}) {
    INFO(c.towers << " tower(s), variable mode " << static_cast<int>(c.mode));
    // Learning rate 0: one step leaves every variable as it started.
    {
      TempDir dir;
      vkt::RunConfig config = quiet(dir.path);
      config.warm_start_from =
          vkt::WarmStartSettings{.ckpt_to_initialize_from = file, .vars_to_warm_start = "hidden/"};
      vkt::Estimator still(mlp(layers, 0.0f, {}, c.towers, c.mode), config);
      CHECK(still.train(input(data), {.steps = 1}) == 1);  // from step 0, not the file's 7
      CHECK(still.warm_started());
      CHECK(still.variable_value("hidden/kernel").f32 == kernel.f32);
      CHECK(still.variable_value("hidden/bias").f32 == bias.f32);
    }
    // Trained: the same bits as a model whose variables start from these
    // values: the slots started at zero and the step at 0 in both.
    TempDir warm, given;
    vkt::RunConfig config = quiet(warm.path);
    config.warm_start_from = vkt::WarmStartSettings{.ckpt_to_initialize_from = file};
    config.warm_start_from->vars_to_warm_start = "hidden/.*";
    {
      vkt::Estimator estimator(mlp(layers, 0.05f, {}, c.towers, c.mode), config);
      CHECK(estimator.train(input(data), {.steps = 3}) == 3);
    }
    {
      vkt::Estimator estimator(
          mlp(layers, 0.05f, {{"hidden/kernel", kernel}, {"hidden/bias", bias}}, c.towers, c.mode),
          quiet(given.path));
      CHECK(estimator.train(input(data), {.steps = 3}) == 3);
    }
    const std::string a = vkt::test::read_file(warm / "ckpt-3.safetensors");
    REQUIRE(a.size() > 500);
    const bool same = a == vkt::test::read_file(given / "ckpt-3.safetensors");
    CHECK(same);
  }
}

TEST_CASE(
    "warm start from another model's checkpoint with a name map, and a run that has its own "
    "checkpoint resumes from it instead",
    "[estimator][warm-start]") {
  const vkt::Dataset data = make_data();
  TempDir big_dir, small_dir;
  {
    vkt::Estimator big(mlp({{"hidden1", 8}, {"hidden2", 8}, {"out", kClasses}}, 0.05f),
                       quiet(big_dir.path));
    big.train(input(data), {.steps = 4});
  }
  vkt::Estimator big(mlp({{"hidden1", 8}, {"hidden2", 8}, {"out", kClasses}}, 0.05f),
                     quiet(big_dir.path));
  const vkt::ModelFn small = mlp({{"enc", 8}, {"head", kClasses}}, 0.0f);
  vkt::RunConfig config = quiet(small_dir.path);
  config.warm_start_from = vkt::WarmStartSettings{
      .ckpt_to_initialize_from = big_dir.path.string(),  // a model dir: its newest checkpoint
      .vars_to_warm_start = "enc/",
      .var_name_to_prev_var_name = {{"enc/kernel", "hidden1/kernel"},
                                    {"enc/bias", "hidden1/bias"}}};
  {
    vkt::Estimator estimator(small, config);
    CHECK(estimator.train(input(data), {.steps = 1}) == 1);
    CHECK(estimator.warm_started());
    CHECK_FALSE(estimator.resumed());
    CHECK(estimator.variable_value("enc/kernel").f32 == big.variable_value("hidden1/kernel").f32);
    CHECK(estimator.variable_value("enc/bias").f32 == big.variable_value("hidden1/bias").f32);
    // hidden1's bias moved in 4 steps: the comparison is not of two zero vectors.
    CHECK(big.variable_value("hidden1/bias").f32 != std::vector<float>(8, 0.0f));
  }
  // The head started from its own initializer, as without a warm start.
  TempDir cold_dir;
  vkt::Estimator cold(small, quiet(cold_dir.path));
  cold.train(input(data), {.steps = 1});
  CHECK(cold.variable_value("head/kernel").f32 ==
        vkt::Estimator(small, quiet(small_dir.path)).variable_value("head/kernel").f32);

  // Resuming: the model's own checkpoint wins over warm_start_from.
  vkt::Estimator again(small, config);
  CHECK(again.train(input(data), {.steps = 1}) == 2);
  CHECK(again.resumed());
  CHECK_FALSE(again.warm_started());
}

TEST_CASE(
    "another program's f16 and bf16 tensors read as the f32 values their bits hold, and other "
    "dtypes are refused naming the tensor",
    "[warm-start]") {
  TempDir files;
  const std::string file = files / "half.safetensors";
  // Values that round differently in the two types, and an odd count.
  const HostTensor given =
      HostTensor::floats({5}, {1.0f / 3.0f, -65504.0f, 1e-6f, 3.14159f, 70000.0f});
  write_checkpoint(file, {{"a", given}, {"b", given}, {"c", given}}, {{"a", "F16"}, {"b", "BF16"}});
  const std::map<std::string, HostTensor> read = vkt::read_safetensors(file);
  CHECK(read.at("a").f32 == vkt::test::rounded_to_half(given.f32, vkt::DType::F16));
  CHECK(read.at("b").f32 == vkt::test::rounded_to_half(given.f32, vkt::DType::BF16));
  CHECK(read.at("c").f32 == given.f32);
  CHECK(read.at("a").f32 != read.at("b").f32);
  CHECK(std::isinf(read.at("a").f32[4]));  // 70000 is past f16's largest value

  const std::string f64 = files / "f64.safetensors";
  write_checkpoint(f64, {{"d", given}}, {{"d", "F64"}});
  CHECK_THAT(error_of([&] { vkt::read_safetensors(f64); }),
             Contains(f64) && Contains("tensor \"d\"") && Contains("F64") &&
                 Contains("\"F16\" or \"BF16\""));
}

TEST_CASE("warm start errors name the file, the variable and what would be valid",
          "[estimator][warm-start][errors]") {
  const vkt::Dataset data = make_data();
  TempDir files;
  const std::string file = files / "given.safetensors";
  write_checkpoint(file, {{"hidden1/kernel", counting({kFeatures, 8}, 0.1f)},
                          {"hidden1/bias", counting({8}, 0.1f)}});
  const auto error_for = [&](const vkt::ModelFn& model, const vkt::WarmStartSettings& settings) {
    TempDir dir;
    vkt::RunConfig config = quiet(dir.path);
    config.warm_start_from = settings;
    vkt::Estimator estimator(model, config);
    const std::string message = error_of([&] { estimator.train(input(data), {.steps = 1}); });
    CHECK_FALSE(estimator.latest_checkpoint());  // nothing was trained or saved
    return message;
  };
  const vkt::ModelFn model = mlp({{"enc", 8}, {"head", kClasses}}, 0.05f);
  // A variable the file does not hold: its name and the closest ones.
  CHECK_THAT(error_for(model, {.ckpt_to_initialize_from = file,
                               .vars_to_warm_start = "enc/",
                               .var_name_to_prev_var_name = {{"enc/kernel", "hidden1/kernal"}}}),
             Contains(file) && Contains("'hidden1/kernal'") && Contains("'enc/kernel'") &&
                 Contains("closest: hidden1/kernel"));
  // A shape that differs: both shapes.
  CHECK_THAT(
      error_for(mlp({{"enc", 5}, {"head", kClasses}}, 0.05f),
                {.ckpt_to_initialize_from = file,
                 .vars_to_warm_start = "enc/kernel",
                 .var_name_to_prev_var_name = {{"enc/kernel", "hidden1/kernel"}}}),
      Contains(file) && Contains("'enc/kernel'") && Contains("[6, 5]") && Contains("[6, 8]"));
  // A regular expression that matches nothing lists the trainable variables.
  CHECK_THAT(error_for(model, {.ckpt_to_initialize_from = file, .vars_to_warm_start = "dec/"}),
             Contains("'dec/'") && Contains("matches none") && Contains("enc/kernel"));
  // A name-map entry for a variable that is not warm-started.
  CHECK_THAT(error_for(model, {.ckpt_to_initialize_from = file,
                               .vars_to_warm_start = "enc/kernel",
                               .var_name_to_prev_var_name = {{"enc/kernel", "hidden1/kernel"},
                                                             {"head/bias", "hidden1/bias"}}}),
             Contains("'head/bias'"));
  // No such file, and a model directory without a checkpoint.
  CHECK_THAT(error_for(model, {.ckpt_to_initialize_from = files / "nope.safetensors"}),
             Contains("nope.safetensors") && Contains("does not exist"));
  TempDir empty;
  CHECK_THAT(error_for(model, {.ckpt_to_initialize_from = empty.path.string()}),
             Contains(empty.path.string()) && Contains("no checkpoint"));
  // An invalid regular expression or no path: refused when the Estimator is made.
  vkt::RunConfig config = quiet(files.path);
  config.warm_start_from =
      vkt::WarmStartSettings{.ckpt_to_initialize_from = file, .vars_to_warm_start = "enc/("};
  CHECK_THAT(error_of([&] { vkt::Estimator estimator(model, config); }),
             Contains("'enc/('") && Contains("regular expression"));
  config.warm_start_from = vkt::WarmStartSettings{};
  CHECK_THAT(error_of([&] { vkt::Estimator estimator(model, config); }),
             Contains("ckpt_to_initialize_from is empty"));
}
