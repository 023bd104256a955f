// swiglu = silu(gate) * up: forward values and the gradients to both inputs
// against a double-precision CPU reference and finite differences, fused and
// unfused alike, and the shape error. (silu alone is in test_elementwise's
// table of unary ops.)
#include <fmt/format.h>

#include <cmath>

#include "../test_support.h"
#include "op_check.h"

using Catch::Matchers::Contains;
using vkt::Shape;
using vkt::Tensor;
using vkt::test::OpSpec;
using vkt::test::Values;

TEST_CASE("swiglu: forward and gradients to gate and up against the CPU reference", "[swiglu]") {
  const Shape shape = GENERATE(Shape{7}, Shape{3, 5, 11}, Shape{4, 64});
  OpSpec spec{
      .name = fmt::format("swiglu {}", shape.str()),
      .shapes = {shape, shape},
      .build = [](const std::vector<Tensor>& in) { return vkt::swiglu(in[0], in[1]); },
      .reference =
          [](const std::vector<Values>& in) {
            Values out(in[0].size());
            for (std::size_t i = 0; i < out.size(); ++i) {
              const double gate = in[0][i];
              out[i] = gate / (1.0 + std::exp(-gate)) * in[1][i];
            }
            return out;
          },
      .ranges = {{-6, 6}, {-2, 2}},
  };
  vkt::test::check_op(spec, 61);
}

TEST_CASE("swiglu: a fused elementwise chain gives the unfused ops' bits", "[swiglu]") {
  const std::int64_t n = 37;
  const std::vector<float> gv = vkt::test::random_floats(n, 1, -6.0f, 6.0f);
  const std::vector<float> uv = vkt::test::random_floats(n, 2);
  const auto run = [&](bool fuse) {
    vkt::Graph g(vkt::test::shared_device());
    const Tensor gate = g.input("gate", {n}), up = g.input("up", {n});
    const Tensor y = vkt::swiglu(gate, up);
    const auto grads = vkt::gradients(vkt::reduce_sum(y * y), {gate, up});
    vkt::Executor exec(g, {y, grads[0].dense, grads[1].dense}, {.fuse = fuse});
    exec.feed("gate", gv);
    exec.feed("up", uv);
    exec.run();
    return std::vector{exec.read(y), exec.read(grads[0].dense), exec.read(grads[1].dense)};
  };
  CHECK(run(true) == run(false));
}

TEST_CASE("swiglu reports gate and up of different shapes", "[swiglu]") {
  vkt::Graph g(vkt::test::shared_device());
  CHECK_THAT(vkt::test::error_of([&] {
               vkt::swiglu(g.input("g", {2, 8}), g.input("u", {2, 4}));
             }),
             Contains("swiglu(gate 'g' [2, 8], up 'u' [2, 4])"));
}
