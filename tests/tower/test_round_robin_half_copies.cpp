// RoundRobin's shares send their weights to the towers in half
// (ReplicateOptions::weight_copy_dtype): every tower holds the owning share's
// f32 weights rounded, and a resume gives the towers those rounded copies.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include <vktower/runtime/graph/half.h>
#include <vktower/runtime/vulkan/instance.h>
#include <vktower/tower/replicate.h>
#include <vktower/tower/tower_run.h>

#include "../mlp_fixture.h"
#include "../test_support.h"
#include "../tower_devices.h"

namespace {

constexpr std::int64_t kBatch = 12, kIn = 7;
constexpr int kTowers = 3, kSteps = 8;
const char* const kWeights[] = {"hidden/kernel", "hidden/bias", "out/kernel", "out/bias"};

using Values = std::vector<std::vector<float>>;

struct Run {
  vkt::Instance instance;
  vkt::ModelContext root;
  vkt::EstimatorSpec spec;
  explicit Run(vkt::DType copies)
      : root(instance, {{"x", {{kBatch, kIn}}}}, {{"y", {{kBatch}, vkt::DType::I32}}},
             {.seed = 9}) {
    root.set_device_pool(&vkt::test::tower_devices());
    const auto replicated = vkt::replicate_model_fn(
        vkt::test::adam_mlp, {.devices = std::vector<std::uint32_t>(kTowers, 0),
                              .variable_mode = vkt::VariableMode::RoundRobin,
                              .weight_copy_dtype = copies});
    spec = replicated(root, {}, {}, vkt::Mode::Train, {});
  }
  void train(const vkt::test::MlpBatches& data, std::size_t from, std::size_t to) {
    for (std::size_t s = from; s < to; ++s) spec.run->train_step(data.xs[s], data.ys[s]);
  }
  /// The masters' weights (each from its owning share).
  Values masters() const {
    Values out;
    for (const char* name : kWeights) out.push_back(spec.run->variable(name));
    return out;
  }
  /// Tower t's copies of them.
  Values tower(int t) const {
    vkt::Graph& g = spec.run->tower_graph(t);
    Values out;
    for (const char* name : kWeights) out.push_back(g.values(*g.find_variable(name)));
    return out;
  }
};

}  // namespace

TEST_CASE(
    "RoundRobin's shares copy weights to the towers in f16 and bf16: every tower holds the "
    "masters rounded, the same bits run to run and after a resume, near the f32 copies") {
  const vkt::test::MlpBatches data(kSteps, 5, kBatch, kIn);
  Run f32(vkt::DType::F32);
  f32.train(data, 0, kSteps);
  const Values f32_masters = f32.masters();
  for (int t = 0; t < kTowers; ++t) CHECK(f32.tower(t) == f32_masters);
  for (const vkt::DType half : {vkt::DType::F16, vkt::DType::BF16}) {
    INFO(vkt::to_string(half));
    const vkt::test::TempDir dir;
    const std::string checkpoint = (dir.path / "half-copies.safetensors").string();
    Run run(half);
    run.train(data, 0, kSteps / 2);
    run.spec.run->save(checkpoint);
    std::vector<Values> at_save;
    for (int t = 0; t < kTowers; ++t) at_save.push_back(run.tower(t));
    run.train(data, kSteps / 2, kSteps);
    const Values masters = run.masters();
    // Each share owns some of the variables: every tower, whichever owns
    // them, holds each master rounded, which differs from it.
    for (int t = 0; t < kTowers; ++t) {
      const Values copies = run.tower(t);
      for (std::size_t v = 0; v < masters.size(); ++v) {
        INFO("tower " << t << ", " << kWeights[v]);
        CHECK(copies[v] == vkt::from_half(vkt::to_half(masters[v], half), half));
        CHECK(copies[v] != masters[v]);
      }
    }
    // Resumed half-way: the restore gives the towers the rounded copies the
    // uninterrupted run's held (not the file's f32 values), so the second
    // half trains the same bits.
    Run resumed(half);
    resumed.spec.run->restore(checkpoint);
    for (int t = 0; t < kTowers; ++t) {
      INFO("tower " << t << " after the restore");
      CHECK(resumed.tower(t) == at_save[static_cast<std::size_t>(t)]);
    }
    resumed.train(data, kSteps / 2, kSteps);
    CHECK(resumed.masters() == masters);
    Run again(half);
    again.train(data, 0, kSteps);
    CHECK(again.masters() == masters);
    // The towers compute with rounded weights; the masters stay within a
    // rounding of the f32 copies' run (Adam's normalised steps absorb it).
    const double u = half == vkt::DType::F16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
    for (std::size_t v = 0; v < masters.size(); ++v) {
      const double distance = vkt::test::norm_relative(masters[v], f32_masters[v]);
      INFO(kWeights[v] << ": " << distance);
      CHECK(distance > 0);
      CHECK(distance <= u);
    }
  }
}
