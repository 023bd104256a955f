// dropout: the kept fraction, the exact scaling, a mask that is a function of
// (seed, step, row of the global batch, op) and nothing else, identity in evaluation, the
// gradient's recomputed mask, and bad rates.
#include <cmath>
#include <limits>

#include <vktower/runtime/graph/ops/dropout.h>

#include "../test_support.h"
#include "op_check.h"

using Catch::Matchers::Contains;
using vkt::Tensor;

namespace {

constexpr std::int64_t kN = 10000;

/// One graph: y = dropout(x, rate), and d sum(w * y) / dx.
struct DropoutGraph {
  vkt::Graph g;
  Tensor x, y, grad;
  std::vector<float> xs = vkt::test::random_floats(kN, 1, 0.5f, 1.5f);  // never 0
  std::vector<float> w = vkt::test::random_floats(kN, 2);

  DropoutGraph(vkt::Device& device, std::uint64_t seed, float rate, std::uint32_t offset = 0,
               std::uint32_t first_row = 0)
      : g(device, {.seed = seed, .first_row = first_row}) {
    x = g.input("x", {kN});
    y = vkt::dropout(x, rate, offset);
    grad = vkt::gradients(vkt::reduce_sum(y * g.constant({kN}, w)), {x})[0].dense;
  }
  /// y of the next run of `exec` (a fresh Executor runs step 0).
  std::vector<float> run(vkt::Executor& exec) const {
    exec.feed("x", xs);
    exec.run();
    return exec.read(y);
  }
};

std::vector<bool> mask_of(const std::vector<float>& y) {
  std::vector<bool> m;
  for (float v : y) m.push_back(v != 0.0f);
  return m;
}

std::int64_t count_differences(const std::vector<bool>& a, const std::vector<bool>& b) {
  std::int64_t n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
  return n;
}

}  // namespace

TEST_CASE(
    "dropout keeps 1 - rate of the elements, scaled exactly, and its gradient uses the same mask") {
  for (const float rate : {0.3f, 0.75f}) {
    INFO("rate " << rate);
    DropoutGraph d(vkt::test::shared_device(), 7, rate);
    vkt::Executor exec(d.g, {d.y, d.grad});
    const float scale = static_cast<float>(1.0 / (1.0 - rate));
    for (int step = 0; step < 2; ++step) {
      INFO("step " << step);
      const std::vector<float> y = d.run(exec);
      const std::vector<float> grad = exec.read(d.grad);
      std::int64_t kept = 0;
      std::size_t wrong_value = 0, wrong_grad = 0;
      for (std::int64_t i = 0; i < kN; ++i) {
        const auto j = static_cast<std::size_t>(i);
        const bool keep = y[j] != 0.0f;
        kept += keep;
        wrong_value += keep && y[j] != d.xs[j] * scale;
        wrong_grad += grad[j] != (keep ? d.w[j] * scale : 0.0f);
      }
      // Binomial(10000, 1 - rate): 5 standard deviations either side.
      const double mean = kN * (1.0 - rate);
      const double bound = 5 * std::sqrt(kN * rate * (1.0 - rate));
      CHECK(std::abs(static_cast<double>(kept) - mean) < bound);
      CHECK(wrong_value == 0);
      CHECK(wrong_grad == 0);
    }
  }
}

TEST_CASE(
    "dropout's mask depends on the seed, the step, the row of the global batch and the op, and on "
    "nothing else") {
  vkt::Device& device = vkt::test::shared_device();
  DropoutGraph d(device, 7, 0.5f);
  vkt::Executor first(d.g, {d.y});
  const std::vector<bool> step0 = mask_of(d.run(first));
  const std::vector<bool> step1 = mask_of(d.run(first));
  // A new step draws a new mask: about half the elements change at rate 0.5.
  CHECK(count_differences(step0, step1) > kN / 4);

  // Another Executor of the same graph, at step 0, and another device.
  vkt::Executor second(d.g, {d.y});
  CHECK(mask_of(d.run(second)) == step0);
  vkt::Device other_device(*vkt::test::shared_slot().instance, 0);
  DropoutGraph same(other_device, 7, 0.5f);
  vkt::Executor on_other(same.g, {same.y});
  CHECK(mask_of(same.run(on_other)) == step0);
  CHECK(mask_of(same.run(on_other)) == step1);

  // Another seed, another replica, another seed_offset, another dropout op of the same graph.
  DropoutGraph reseeded(device, 8, 0.5f);
  vkt::Executor e_reseeded(reseeded.g, {reseeded.y});
  CHECK(count_differences(mask_of(reseeded.run(e_reseeded)), step0) > kN / 4);
  // A graph whose rows start one later in the global batch (a tower's shard):
  // its row r draws what row r + 1 of the first graph drew.
  DropoutGraph shifted(device, 7, 0.5f, 0, 1);
  vkt::Executor e_shifted(shifted.g, {shifted.y});
  const std::vector<bool> shifted_mask = mask_of(shifted.run(e_shifted));
  CHECK(std::vector<bool>(shifted_mask.begin(), shifted_mask.end() - 1) ==
        std::vector<bool>(step0.begin() + 1, step0.end()));
  CHECK(count_differences(shifted_mask, step0) > kN / 4);
  DropoutGraph offset(device, 7, 0.5f, 1);
  vkt::Executor e_offset(offset.g, {offset.y});
  CHECK(count_differences(mask_of(offset.run(e_offset)), step0) > kN / 4);
  const Tensor y2 = vkt::dropout(d.x, 0.5f);
  vkt::Executor both(d.g, {d.y, y2});
  const std::vector<bool> m1 = mask_of(d.run(both));
  CHECK(m1 == step0);
  CHECK(count_differences(mask_of(both.read(y2)), m1) > kN / 4);
}

TEST_CASE("dropout is the identity in an evaluation Executor, gradient included") {
  DropoutGraph d(vkt::test::shared_device(), 7, 0.5f);
  vkt::Executor eval(d.g, {d.y, d.grad}, {.training = false});
  CHECK(d.run(eval) == d.xs);
  CHECK(eval.read(d.grad) == d.w);
  CHECK(d.run(eval) == d.xs);  // every step
}

TEST_CASE("dropout rejects a rate below 0 or at or above 1") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", {4});
  for (const float rate : {1.0f, -0.1f, 1.5f, std::numeric_limits<float>::quiet_NaN()}) {
    CHECK_THAT(vkt::test::error_of([&] { vkt::dropout(x, rate); }), Contains("outside [0, 1)"));
  }
  const Tensor ids = g.input("ids", {4}, vkt::DType::I32);
  CHECK_THAT(vkt::test::error_of([&] { vkt::dropout(ids, 0.5f); }), Contains("i32"));
  // rate 0 keeps everything, unscaled, in training too.
  const Tensor y = vkt::dropout(x, 0.0f);
  vkt::Executor exec(g, {y});
  exec.feed("x", std::vector<float>{1, -2, 3, 0.5f});
  exec.run();
  CHECK(exec.read(y) == std::vector<float>{1, -2, 3, 0.5f});
}

TEST_CASE(
    "dropout draws for the graph's global step: a graph restored at step k draws step k's mask, "
    "and set_step picks any step",
    "[dropout][resume]") {
  vkt::Device& device = vkt::test::shared_device();
  DropoutGraph d(device, 7, 0.5f);
  vkt::Executor exec(d.g, {d.y});
  std::vector<std::vector<bool>> masks;
  for (int step = 0; step < 3; ++step) masks.push_back(mask_of(d.run(exec)));

  // A new process's graph, restored at global step 2 (set before or after its
  // Executor is made): its first run draws step 2's mask, not step 0's.
  DropoutGraph before(device, 7, 0.5f);
  before.g.set_global_step(2);
  vkt::Executor e_before(before.g, {before.y});
  CHECK(e_before.step() == 2);
  CHECK(mask_of(before.run(e_before)) == masks[2]);
  DropoutGraph after(device, 7, 0.5f);
  vkt::Executor e_after(after.g, {after.y});
  after.g.set_global_step(1);
  CHECK(mask_of(after.run(e_after)) == masks[1]);
  CHECK(mask_of(after.run(e_after)) == masks[2]);  // then one step per run, as before

  // set_step: any step, 64-bit ones included (2^32 is not step 0 again).
  e_after.set_step(0);
  CHECK(mask_of(after.run(e_after)) == masks[0]);
  e_after.set_step(std::uint64_t{1} << 32);
  CHECK(count_differences(mask_of(after.run(e_after)), masks[0]) > kN / 4);
}

namespace {

// dropout_hash.glsl on the host, to check every element's mask.
std::uint32_t mix32(std::uint32_t v) {
  v ^= v >> 16;
  v *= 0x7feb352du;
  v ^= v >> 15;
  v *= 0x846ca68bu;
  v ^= v >> 16;
  return v;
}

bool kept_by_hash(std::uint32_t seed, std::uint32_t step, std::uint32_t key, std::uint32_t row,
                  std::uint32_t element, float rate) {
  std::uint32_t h = mix32(seed ^ 0x9e3779b9u);
  h = mix32(h ^ step);
  h = mix32(h ^ key);
  h = mix32(h ^ row);
  const std::uint32_t e = mix32(mix32(h ^ element) + key);
  return e >= static_cast<std::uint32_t>(std::ldexp(static_cast<double>(rate), 32));
}

}  // namespace

TEST_CASE(
    "dropout keeps exactly the elements its hash keeps, rows of a multiple of 4 (one vec4 an "
    "invocation) or not (four elements across rows)") {
  constexpr std::uint32_t kSeed = 7, kFirstRow = 3, kOffset = 5;
  constexpr float kRate = 0.4f;
  for (const std::int64_t cols : {12, 10, 1}) {
    INFO("rows of " << cols);
    const std::int64_t rows = 5;
    vkt::Graph g(vkt::test::shared_device(), {.seed = kSeed, .first_row = kFirstRow});
    const Tensor x = g.input("x", {rows, cols});
    const auto key = static_cast<std::uint32_t>(g.nodes().size()) * 0x9e3779b9u ^ kOffset;
    const Tensor y = vkt::dropout(x, kRate, kOffset);
    vkt::Executor exec(g, {y});
    const std::vector<float> xs = vkt::test::random_floats(rows * cols, 3, 0.5f, 1.5f);
    const float scale = static_cast<float>(1.0 / (1.0 - kRate));
    for (std::uint32_t step = 0; step < 2; ++step) {
      INFO("step " << step);
      exec.feed("x", xs);
      exec.run();
      const std::vector<float> ys = exec.read(y);
      std::int64_t wrong = 0;
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t c = 0; c < cols; ++c) {
          const auto i = static_cast<std::size_t>(r * cols + c);
          const bool keep =
              kept_by_hash(kSeed, step, key, kFirstRow + static_cast<std::uint32_t>(r),
                           static_cast<std::uint32_t>(c), kRate);
          wrong += ys[i] != (keep ? xs[i] * scale : 0.0f);
        }
      }
      CHECK(wrong == 0);
    }
  }
}
