// concat, split, slice_rows and slice_axis: forward values and gradients
// against double-precision CPU references (op_check.h), the view/copy choice of
// slice_rows, the merged gradient of a split, i32 tensors and misuse.
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

int resolve(int axis, const Shape& s) {
  return axis < 0 ? axis + s.rank() : axis;
}

std::int64_t outer_of(const Shape& s, int axis) {
  std::int64_t p = 1;
  for (int i = 0; i < axis; ++i) p *= s[i];
  return p;
}

/// Entries [begin, begin + size) of x along `axis`, on the CPU.
Values take(const Values& x, const Shape& s, int axis, std::int64_t begin, std::int64_t size) {
  const std::int64_t outer = outer_of(s, axis);
  const std::int64_t inner = static_cast<std::int64_t>(x.size()) / outer;
  const std::int64_t trailing = inner / s[axis];
  Values out;
  for (std::int64_t o = 0; o < outer; ++o) {
    const auto first = x.begin() + o * inner + begin * trailing;
    out.insert(out.end(), first, first + size * trailing);
  }
  return out;
}

/// The pieces joined along `axis`, on the CPU.
Values join(const std::vector<Values>& xs, const std::vector<Shape>& shapes, int axis) {
  const std::int64_t outer = outer_of(shapes.front(), axis);
  Values out;
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::size_t p = 0; p < xs.size(); ++p) {
      const std::int64_t inner = static_cast<std::int64_t>(xs[p].size()) / outer;
      const auto first = xs[p].begin() + o * inner;
      out.insert(out.end(), first, first + inner);
    }
  }
  return out;
}

Shape with_dim(const Shape& s, int axis, std::int64_t size) {
  std::vector<std::int64_t> d = s.dims();
  d[axis] = size;
  return Shape(d);
}

const vkt::Op& producer(const Tensor& t) {
  return *t.graph().nodes().at(static_cast<std::size_t>(t.graph().info(t).node)).op;
}

}  // namespace

TEST_CASE("concat: forward and gradient against the CPU reference") {
  struct Case {
    std::vector<Shape> shapes;
    int axis;
  };
  const std::vector<Case> cases = {
      {{Shape{7}, Shape{1}, Shape{33}}, 0},
      {{Shape{3, 5}, Shape{3, 1}, Shape{3, 7}}, -1},
      {{Shape{1, 3, 3}, Shape{2, 3, 3}}, 0},  // unaligned piece starts
      {{Shape{1, 2, 5}, Shape{1, 3, 5}}, 1},  // one block per piece after a leading 1
      {{Shape{2, 3, 4}, Shape{2, 5, 4}}, 1},  // middle axis of rank 3
      {{Shape{2, 3, 4}, Shape{2, 3, 1}, Shape{2, 3, 3}}, 2},
      // 6 inputs: more than one dispatch's worth of pieces
      {{Shape{3, 1}, Shape{3, 2}, Shape{3, 3}, Shape{3, 4}, Shape{3, 5}, Shape{3, 6}}, 1},
  };
  for (const Case& c : cases) {
    std::string name = "concat";
    for (const Shape& s : c.shapes) name += fmt::format(" {}", s.str());
    const OpSpec spec{
        .name = fmt::format("{} axis {}", name, c.axis),
        .shapes = c.shapes,
        .build = [&](const std::vector<Tensor>& in) { return vkt::concat(in, c.axis); },
        .reference =
            [&](const std::vector<Values>& in) {
              return join(in, c.shapes, resolve(c.axis, c.shapes.front()));
            },
    };
    vkt::test::check_op(spec, 5);
  }
}

TEST_CASE("split: every piece's forward values and the gradient through all of them") {
  struct Case {
    Shape shape;
    std::vector<std::int64_t> sizes;
    int axis;
  };
  const std::vector<Case> cases = {
      {Shape{7, 3}, {3, 1, 3}, 0},
      {Shape{5, 7, 3}, {2, 1, 4}, 1},
      {Shape{4, 2, 11}, {5, 6}, -1},
      {Shape{33}, {1, 7, 25}, 0},
  };
  for (const Case& c : cases) {
    const int axis = resolve(c.axis, c.shape);
    // The pieces joined in another order, the first scaled, so that a piece
    // taken from the wrong place or a gradient sent to the wrong place shows.
    std::vector<std::size_t> order;
    for (std::size_t p = 1; p < c.sizes.size(); ++p) order.push_back(p);
    order.push_back(0);
    const OpSpec spec{
        .name = fmt::format("split {} axis {}", c.shape.str(), c.axis),
        .shapes = {c.shape},
        .build =
            [&](const std::vector<Tensor>& in) {
              std::vector<Tensor> pieces = vkt::split(in[0], c.sizes, c.axis);
              pieces[0] = pieces[0] * 2.0f;
              std::vector<Tensor> reordered;
              for (std::size_t p : order) reordered.push_back(pieces[p]);
              return vkt::concat(reordered, c.axis);
            },
        .reference =
            [&](const std::vector<Values>& in) {
              std::vector<Values> pieces;
              std::vector<Shape> shapes;
              std::int64_t begin = 0;
              for (std::int64_t s : c.sizes) {
                pieces.push_back(take(in[0], c.shape, axis, begin, s));
                shapes.push_back(with_dim(c.shape, axis, s));
                begin += s;
              }
              for (double& v : pieces[0]) v *= 2;
              std::vector<Values> reordered;
              std::vector<Shape> reordered_shapes;
              for (std::size_t p : order) {
                reordered.push_back(pieces[p]);
                reordered_shapes.push_back(shapes[p]);
              }
              return join(reordered, reordered_shapes, axis);
            },
    };
    vkt::test::check_op(spec, 7);
  }
}

TEST_CASE("a k-way split's gradient is one op, not k pads and k - 1 additions") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.variable("x", {3, 6});
  const std::vector<Tensor> pieces = vkt::split(x, {1, 1, 1, 1, 1, 1}, 1);
  Tensor loss = vkt::reduce_sum(pieces[0]);
  for (std::size_t p = 1; p < pieces.size(); ++p) {
    loss = loss + vkt::reduce_sum(pieces[p] * static_cast<float>(p + 1));
  }
  const std::vector<vkt::Gradient> grads = vkt::gradients(loss, {x});
  REQUIRE(grads[0].valid());
  CHECK(producer(grads[0].dense).type() == "concat");  // the pads, merged: they cover x
  vkt::Executor exec(g, {grads[0].dense});
  exec.run();
  const std::vector<float> row{1, 2, 3, 4, 5, 6};
  std::vector<float> want;
  for (int r = 0; r < 3; ++r) want.insert(want.end(), row.begin(), row.end());
  CHECK(exec.read(grads[0].dense) == want);
}

TEST_CASE("slice_rows: a view on the device's alignment, a copy elsewhere") {
  const std::size_t alignment = vkt::tensor_alignment(vkt::test::shared_device());
  const auto columns = static_cast<std::int64_t>(alignment / 4);  // a row = one alignment
  struct Case {
    Shape shape;
    std::int64_t begin, count;
    bool view;
  };
  const std::vector<Case> cases = {
      {Shape{6, columns}, 2, 3, true},
      {Shape{5, 3, 2}, 1, 3, false},  // rows of 24 bytes: row 1 is unaligned
      {Shape{5, 3, 2}, 0, 4, true},   // from the first row: always a view
      {Shape{127}, 8, 100, alignment <= 32},
  };
  for (const Case& c : cases) {
    const std::int64_t row = c.shape.elements() / c.shape[0];
    const OpSpec spec{
        .name = fmt::format("slice_rows {} begin {} count {}", c.shape.str(), c.begin, c.count),
        .shapes = {c.shape},
        .build =
            [&](const std::vector<Tensor>& in) {
              const Tensor y = vkt::slice_rows(in[0], c.begin, c.count);
              const std::optional<std::size_t> offset = producer(y).view_offset();
              CHECK(offset.has_value() == c.view);
              if (offset) CHECK(*offset == static_cast<std::size_t>(c.begin * row * 4));
              // Through another op, so the view is read from its offset by a kernel.
              return y * 3.0f;
            },
        .reference =
            [&](const std::vector<Values>& in) {
              Values out(in[0].begin() + c.begin * row, in[0].begin() + (c.begin + c.count) * row);
              for (double& v : out) v *= 3;
              return out;
            },
    };
    vkt::test::check_op(spec, 9);
  }
}

TEST_CASE("slice_axis and pad_axis: a block of a middle axis and back") {
  const Shape shape{3, 5, 4};
  const OpSpec spec{
      .name = "pad_axis(slice_axis)",
      .shapes = {shape},
      .build =
          [&](const std::vector<Tensor>& in) {
            return vkt::pad_axis(vkt::slice_axis(in[0], 1, 1, 3), Shape{3, 7, 4}, 1, 2);
          },
      .reference =
          [&](const std::vector<Values>& in) {
            const Values block = take(in[0], shape, 1, 1, 3);
            const Values zeros2(3 * 2 * 4, 0.0), zeros2b(3 * 2 * 4, 0.0);
            return join({zeros2, block, zeros2b}, {Shape{3, 2, 4}, Shape{3, 3, 4}, Shape{3, 2, 4}},
                        1);
          },
  };
  vkt::test::check_op(spec, 11);
}

TEST_CASE("concat and split move i32 tensors bit for bit") {
  vkt::Graph g(vkt::test::shared_device());
  const std::vector<std::int32_t> a{-1, 2147483647, 3, -2147483647 - 1, 5, 6};
  const std::vector<std::int32_t> b{7, 8, 9};
  const Tensor ta = g.constant_i32({2, 3}, a);
  const Tensor tb = g.constant_i32({1, 3}, b);
  const Tensor joined = vkt::concat({ta, tb}, 0);
  const Tensor columns = vkt::split(joined, {2, 1}, 1)[1];
  CHECK(joined.dtype() == vkt::DType::I32);
  vkt::Executor exec(g, {joined, columns});
  exec.run();
  CHECK(exec.read_i32(joined) ==
        std::vector<std::int32_t>{-1, 2147483647, 3, -2147483647 - 1, 5, 6, 7, 8, 9});
  CHECK(exec.read_i32(columns) == std::vector<std::int32_t>{3, 6, 9});
}

TEST_CASE("shape op misuse is a vkt::Error naming the shapes") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", {4, 3});
  const Tensor y = g.input("y", {4, 2});
  const Tensor ids = g.input("ids", {4, 2}, vkt::DType::I32);
  const std::string mismatch = vkt::test::error_of([&] { vkt::concat({x, y}, 0); });
  CHECK_THAT(mismatch, Contains("[4, 3]"));
  CHECK_THAT(mismatch, Contains("[4, 2]"));
  CHECK(vkt::concat({x, y}, 1).shape() == Shape{4, 5});
  CHECK_THAT(vkt::test::error_of([&] { vkt::concat({y, ids}, 0); }), Contains("i32"));
  CHECK_THAT(vkt::test::error_of([&] { vkt::concat({}, 0); }), Contains("no tensors"));
  CHECK_THAT(vkt::test::error_of([&] { vkt::concat({x, y}, 2); }), Contains("axis 2"));
  CHECK_THAT(vkt::test::error_of([&] {
               vkt::split(x, {2, 1}, 0);
             }),
             Contains("add up to 3 but 'x' has 4"));
  CHECK_THAT(vkt::test::error_of([&] { vkt::split(x, {4, 0}, 0); }), Contains("at least 1"));
  CHECK_THAT(vkt::test::error_of([&] { vkt::slice_rows(x, 3, 2); }), Contains("[4, 3]"));
  CHECK_THAT(vkt::test::error_of([&] { vkt::slice_rows(x, -1, 2); }), Contains("[0, 4)"));
  CHECK_THAT(vkt::test::error_of([&] {
               vkt::pad_axis(x, Shape{5, 4}, 0, 0);
             }),
             Contains("does not fit"));
}
