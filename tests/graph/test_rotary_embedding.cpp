// rotary_embedding: forward values against a CPU reference of Hugging Face's
// f32 computation (angles from f32 inv_freq and an f32 product, cos and sin in
// double), the gradient to x by finite differences, the gradient path undoing
// the rotation, long positions, new positions fed to one recorded program,
// and the build-time errors.
#include <fmt/format.h>

#include <cmath>
#include <numeric>

#include <vktower/runtime/graph/ops/rotary_embedding.h>

#include "../test_support.h"
#include "op_check.h"

using Catch::Matchers::Contains;
using vkt::Shape;
using vkt::Tensor;
using vkt::test::OpSpec;
using vkt::test::Values;

namespace {

/// The angle Hugging Face's LlamaRotaryEmbedding computes in f32 for position
/// `pos` and frequency `i` of a head of `dh`: inv_freq = 1 / theta^(2i/dh),
/// each step rounded to f32, then the f32 product with the position.
double hf_angle(std::int32_t pos, std::int64_t i, std::int64_t dh, float theta) {
  const float exponent = static_cast<float>(2 * i) / static_cast<float>(dh);
  const auto power = static_cast<float>(std::pow(double{theta}, double{exponent}));
  const float inv_freq = 1.0f / power;
  return static_cast<double>(static_cast<float>(pos) * inv_freq);
}

/// x * cos + rotate_half(x) * sin for x [B, H, T, Dh] at positions [T] or
/// [B, T] (`batched`), in double from the f32 angles.
Values rope_reference(const Values& x, const Shape& s, const std::vector<std::int32_t>& positions,
                      bool batched, float theta) {
  const std::int64_t heads = s[1], seq = s[2], dh = s[3], half = dh / 2;
  Values y(x.size());
  for (std::int64_t row = 0; row < s[0] * heads * seq; ++row) {
    const std::int64_t t = row % seq, b = row / seq / heads;
    const std::int32_t pos = positions[static_cast<std::size_t>(batched ? b * seq + t : t)];
    for (std::int64_t i = 0; i < half; ++i) {
      const double angle = hf_angle(pos, i, dh, theta);
      const auto lo = static_cast<std::size_t>(row * dh + i),
                 hi = lo + static_cast<std::size_t>(half);
      y[lo] = x[lo] * std::cos(angle) - x[hi] * std::sin(angle);
      y[hi] = x[hi] * std::cos(angle) + x[lo] * std::sin(angle);
    }
  }
  return y;
}

struct RopeCase {
  Shape x;
  std::vector<std::int32_t> positions;
  bool batched;  ///< positions [B, T], else [T]
};

}  // namespace

TEST_CASE("rotary_embedding: forward and gradient to x against the CPU reference",
          "[rotary_embedding]") {
  const RopeCase c =
      GENERATE(RopeCase{Shape{2, 3, 5, 6}, {7, 8, 9, 10, 11}, false},  // positions not from 0
               RopeCase{Shape{2, 2, 5, 10}, {0, 1, 2, 3, 4, 40, 41, 42, 43, 44}, true},  // [B, T]
               RopeCase{Shape{1, 1, 3, 2}, {5, 0, 300}, false},                          // Dh 2
               RopeCase{Shape{1, 2, 1, 64}, {1234}, false});  // one new token, a wide head
  const float theta = 10000.0f;
  const Shape pos_shape = c.batched ? Shape{c.x[0], c.x[2]} : Shape{c.x[2]};
  OpSpec spec{
      .name = fmt::format("rotary_embedding {} at positions {}", c.x.str(), pos_shape.str()),
      .shapes = {c.x},
      .build =
          [&](const std::vector<Tensor>& in) {
            const Tensor pos = in[0].graph().constant_i32(pos_shape, c.positions);
            return vkt::rotary_embedding(in[0], pos, theta);
          },
      .reference =
          [&](const std::vector<Values>& in) {
            return rope_reference(in[0], c.x, c.positions, c.batched, theta);
          },
  };
  vkt::test::check_op(spec, 41);
}

TEST_CASE("rotary_embedding: long positions match the f32 angles' cos and sin within 2e-6",
          "[rotary_embedding]") {
  // Angles up to thousands of radians, where the device's own sin and cos are
  // loose: the kernel's reduction keeps PyTorch's values (its cos and sin of
  // the same f32 angles) well inside 1e-4.
  const Shape s{1, 2, 6, 16};
  const std::vector<std::int32_t> positions{0, 1, 1000, 2047, 4095, 8191};
  const float theta = 500000.0f;  // Llama 3's
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", s);
  const Tensor pos = g.input("positions", {6}, vkt::DType::I32);
  const Tensor y = vkt::rotary_embedding(x, pos, theta);
  vkt::Executor exec(g, {y});
  const std::vector<float> xv = vkt::test::random_floats(static_cast<std::size_t>(s.elements()), 3);
  exec.feed("x", xv);
  exec.feed("positions", positions);
  exec.run();
  const std::vector<float> got = exec.read(y);
  const Values want = rope_reference(Values(xv.begin(), xv.end()), s, positions, false, theta);
  double worst = 0;
  for (std::size_t j = 0; j < got.size(); ++j) worst = std::max(worst, std::abs(got[j] - want[j]));
  CHECK(worst < 2e-6);
}

TEST_CASE("rotary_embedding: the gradient path turns back by the same angles",
          "[rotary_embedding]") {
  // y = R x with R a rotation, so the gradient of sum(y * y) / 2 is R^T y = x.
  const Shape s{2, 3, 5, 10};
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", s);
  const Tensor pos = g.input("positions", {2, 5}, vkt::DType::I32);
  const Tensor y = vkt::rotary_embedding(x, pos, 10000.0f);
  const Tensor dx = vkt::gradients(vkt::reduce_sum(y * y) * 0.5f, {x})[0].dense;
  vkt::Executor exec(g, {y, dx});
  const std::vector<float> xv = vkt::test::random_floats(static_cast<std::size_t>(s.elements()), 4);
  exec.feed("x", xv);
  exec.feed("positions", std::vector<std::int32_t>{3, 4, 5, 6, 7, 100, 2000, 3000, 4000, 5000});
  exec.run();
  const std::vector<float> back = exec.read(dx), turned = exec.read(y);
  double worst = 0, moved = 0;
  for (std::size_t j = 0; j < xv.size(); ++j) {
    worst = std::max(worst, static_cast<double>(std::abs(back[j] - xv[j])));
    moved = std::max(moved, static_cast<double>(std::abs(turned[j] - xv[j])));
  }
  CHECK(worst < 1e-5);
  CHECK(moved > 0.1);  // the rotation itself moved x
}

TEST_CASE("rotary_embedding: new positions fed to the same program, as a generation step",
          "[rotary_embedding]") {
  const Shape s{1, 2, 1, 8};
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", s);
  const Tensor pos = g.input("positions", {1}, vkt::DType::I32);
  const Tensor y = vkt::rotary_embedding(x, pos);
  vkt::Executor exec(g, {y});
  const std::vector<float> xv = vkt::test::random_floats(16, 8);
  exec.feed("x", xv);
  for (const std::int32_t p : {0, 17, 511}) {
    exec.feed("positions", std::vector<std::int32_t>{p});
    exec.run();
    const std::vector<float> got = exec.read(y);
    const Values want = rope_reference(Values(xv.begin(), xv.end()), s, {p}, false, 10000.0f);
    for (std::size_t j = 0; j < got.size(); ++j) CHECK(got[j] == Approx(want[j]).margin(1e-6));
    if (p == 0) CHECK(got == xv);  // position 0 turns by nothing
  }
}

TEST_CASE("rotary_embedding reports bad inputs when the graph is built", "[rotary_embedding]") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", {2, 3, 5, 6});
  const Tensor pos = g.input("pos", {5}, vkt::DType::I32);
  using vkt::test::error_of;
  CHECK_THAT(error_of([&] {
               vkt::rotary_embedding(g.input("odd", {2, 3, 5, 7}), pos);
             }),
             Contains("rotary_embedding('odd' f32 [2, 3, 5, 7]") && Contains("even head size"));
  CHECK_THAT(error_of([&] {
               vkt::rotary_embedding(g.input("r3", {3, 5, 6}), pos);
             }),
             Contains("must be [B, H, T, Dh]"));
  CHECK_THAT(error_of([&] { vkt::rotary_embedding(x, g.input("fpos", {5})); }),
             Contains("positions 'fpos' f32 [5]") && Contains("must be i32 [T] = [5]"));
  CHECK_THAT(error_of([&] { vkt::rotary_embedding(x, g.input("p4", {4}, vkt::DType::I32)); }),
             Contains("or [B, T] = [2, 5]"));
  CHECK_THAT(error_of([&] { vkt::rotary_embedding(x, pos, 0.0f); }), Contains("theta is 0"));
}
