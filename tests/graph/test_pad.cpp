// pad: forward values and the gradient (the block cut back out) against a CPU
// reference and finite differences (op_check.h), on ranks 1 to 4, and the
// build-time errors.
#include <fmt/format.h>

#include <vktower/runtime/graph/ops/shape_ops.h>

#include "../test_support.h"
#include "op_check.h"

using Catch::Matchers::Contains;
using vkt::Shape;
using vkt::Tensor;
using vkt::test::OpSpec;
using vkt::test::Values;

namespace {

using Pads = std::vector<std::pair<std::int64_t, std::int64_t>>;

/// `x` (shape `s`) padded with `value`, in double.
Values pad_reference(const Values& x, const Shape& s, const Pads& pads, double value) {
  std::vector<std::int64_t> dims = s.dims();
  for (std::size_t k = 0; k < dims.size(); ++k) dims[k] += pads[k].first + pads[k].second;
  const Shape out(dims);
  Values y(static_cast<std::size_t>(out.elements()), value);
  const auto in_dims = vkt::test::padded(s);
  const int lead = vkt::test::kRefRank - s.rank();
  for (std::int64_t j = 0; j < out.elements(); ++j) {
    const auto c = vkt::test::coords(j, out);
    std::int64_t src = 0;
    bool inside = true;
    for (int k = 0; k < vkt::test::kRefRank; ++k) {
      const std::int64_t at =
          c[k] - (k >= lead ? pads[static_cast<std::size_t>(k - lead)].first : 0);
      inside = inside && at >= 0 && at < in_dims[k];
      src = src * in_dims[k] + at;
    }
    if (inside) y[static_cast<std::size_t>(j)] = x[static_cast<std::size_t>(src)];
  }
  return y;
}

struct PadCase {
  Shape shape;
  Pads pads;
  float value;
};

}  // namespace

TEST_CASE("pad: forward and gradient against the CPU reference", "[pad]") {
  const PadCase c = GENERATE(
      PadCase{Shape{3, 4}, {{1, 2}, {0, 3}}, 0.0f}, PadCase{Shape{5}, {{2, 0}}, -1.5f},
      PadCase{Shape{2, 3, 2}, {{0, 1}, {1, 1}, {2, 0}}, 0.25f},
      PadCase{Shape{2, 7, 5, 3}, {{0, 0}, {1, 2}, {2, 1}, {0, 1}}, 0.0f},
      // rank 6: the unpadded axes fold into their left neighbours
      PadCase{Shape{2, 3, 2, 3, 2, 2}, {{1, 0}, {0, 0}, {0, 1}, {0, 0}, {2, 1}, {0, 0}}, 0.5f});
  OpSpec spec{
      .name = fmt::format("pad {} with {}", c.shape.str(), c.value),
      .shapes = {c.shape},
      .build = [&](const std::vector<Tensor>& in) { return vkt::pad(in[0], c.pads, c.value); },
      .reference =
          [&](const std::vector<Values>& in) {
            return pad_reference(in[0], c.shape, c.pads, c.value);
          },
  };
  vkt::test::check_op(spec, 5);
}

TEST_CASE("pad's gradient, the cut, has the pad as its own gradient", "[pad]") {
  // The gradient of sum(pad(x) * v) with respect to x is cut(v), which reads
  // v and not x; the gradient of sum(cut(v) * u) with respect to v is pad(u).
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", {2, 3});
  const Tensor v = g.input("v", {4, 4});
  const Pads pads{{1, 1}, {0, 1}};
  const Tensor cut = vkt::gradients(vkt::reduce_sum(vkt::pad(x, pads) * v), {x})[0].dense;
  const std::vector<float> u{1, 2, 3, 4, 5, 6};
  const Tensor dv = vkt::gradients(vkt::reduce_sum(cut * g.constant({2, 3}, u)), {v})[0].dense;
  vkt::Executor exec(g, {cut, dv});
  std::vector<float> values(16);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  exec.feed("v", values);
  exec.run();
  CHECK(exec.read(cut) == std::vector<float>{4, 5, 6, 8, 9, 10});
  CHECK(exec.read(dv) == std::vector<float>{0, 0, 0, 0, 1, 2, 3, 0, 4, 5, 6, 0, 0, 0, 0, 0});
}

TEST_CASE("pad with nothing to add returns its input, and bad paddings are reported", "[pad]") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", {2, 3});
  CHECK(vkt::pad(x, {{0, 0}, {0, 0}}) == x);
  CHECK(vkt::pad(x, {{0, 0}, {0, 2}}).shape() == Shape{2, 5});
  using vkt::test::error_of;
  CHECK_THAT(error_of([&] {
               vkt::pad(x, {{1, 1}});
             }),
             Contains("pad('x' [2, 3]): 1 (before, after) pairs for a rank-2 tensor"));
  CHECK_THAT(error_of([&] {
               vkt::pad(x, {{0, 0}, {-1, 0}});
             }),
             Contains("dimension 1 has padding (-1, 0)"));
  CHECK_THAT(error_of([&] {
               vkt::pad(x, {{0, std::int64_t{1} << 40}, {0, 0}});
             }),
             Contains("between 0 and 2^30"));
  // Four padded axes past the first leave 5 after folding.
  const Tensor x5 = g.input("x5", {2, 2, 2, 2, 2});
  CHECK_THAT(error_of([&] {
               vkt::pad(x5, {{0, 0}, {1, 0}, {1, 0}, {1, 0}, {1, 0}});
             }),
             Contains("pad('x5' [2, 2, 2, 2, 2]): pads 4 axes apart from the first") &&
                 Contains("pad in two steps"));
  CHECK(vkt::pad(x5, {{1, 0}, {1, 0}, {1, 0}, {0, 0}, {1, 0}}).shape() == Shape{3, 3, 3, 2, 3});
  CHECK_THAT(error_of([&] {
               vkt::pad(g.input("ids", {3}, vkt::DType::I32), {{1, 1}});
             }),
             Contains("holds i32 values"));
}
