// embedding_lookup: forward values (out-of-range ids give zeros), its sparse
// gradient, scatter_add_dense (duplicates add up), and the accumulation of
// sparse and dense gradient parts, checked against finite differences.
#include <fmt/format.h>

#include <map>

#include <vktower/runtime/graph/ops/embedding.h>
#include <vktower/runtime/graph/ops/shape_ops.h>

#include "../test_support.h"
#include "op_check.h"

using Catch::Matchers::Contains;
using vkt::Shape;
using vkt::Tensor;
using vkt::test::gather_rows;
using vkt::test::OpSpec;
using vkt::test::Values;

namespace {

/// The dense [rows, dim] sum of value rows at their indices.
Values scatter(const Values& values, std::int64_t rows, std::int64_t dim,
               const std::vector<std::int32_t>& indices) {
  Values out(static_cast<std::size_t>(rows * dim), 0.0);
  for (std::size_t j = 0; j < indices.size(); ++j) {
    if (indices[j] < 0 || indices[j] >= rows) continue;
    for (std::int64_t c = 0; c < dim; ++c) {
      out[static_cast<std::size_t>(indices[j] * dim + c)] +=
          values[j * static_cast<std::size_t>(dim) + static_cast<std::size_t>(c)];
    }
  }
  return out;
}

}  // namespace

TEST_CASE("embedding_lookup gathers rows by id, zeros for ids out of range") {
  const std::int64_t rows = 13, dim = 7;
  const std::vector<std::int32_t> ids{0, 12, 5, -1, 13, 5, 100, 3, 7, 1, 12, 0};
  for (const Shape& ids_shape : {Shape{12}, Shape{3, 4}, Shape{2, 3, 2}}) {
    std::vector<std::int64_t> out_dims = ids_shape.dims();
    out_dims.push_back(dim);
    // params go through identity: an op's output, so its gradient is dense
    // (scatter_add_dense) and op_check can compare it with finite differences.
    const OpSpec spec{
        .name = fmt::format("embedding_lookup ids {}", ids_shape.str()),
        .shapes = {Shape{rows, dim}},
        .build =
            [&](const std::vector<Tensor>& in) {
              const Tensor y = vkt::embedding_lookup(vkt::identity(in[0]),
                                                     in[0].graph().constant_i32(ids_shape, ids));
              CHECK(y.shape() == Shape(out_dims));
              return y;
            },
        .reference = [&](const std::vector<Values>& in) { return gather_rows(in[0], dim, ids); },
    };
    const vkt::test::OpResult r = vkt::test::check_op(spec, 13);
    // Row -1, 13 and 100 read as zeros, whatever lies around params in memory.
    for (std::size_t j : {3u, 4u, 6u}) {
      for (std::int64_t c = 0; c < dim; ++c) CHECK(r.output[j * dim + c] == 0.0f);
    }
  }
}

TEST_CASE("the gradient of an embedding variable is sparse rows: dy and the ids") {
  vkt::Graph g(vkt::test::shared_device());
  const std::int64_t rows = 10, dim = 5;
  const Tensor table = g.variable("table", {rows, dim}, vkt::Initializer::uniform(-1, 1));
  const std::vector<std::int32_t> ids{4, 1, 4, 9, 0, 4};
  const Tensor lookup = vkt::embedding_lookup(table, g.constant_i32({2, 3}, ids));
  const std::vector<float> w = vkt::test::random_floats(6 * dim, 3);
  const Tensor loss = vkt::reduce_sum(lookup * g.constant(lookup.shape(), w));
  const std::vector<vkt::Gradient> grads = vkt::gradients(loss, {table});
  REQUIRE(grads[0].sparse());
  CHECK_FALSE(grads[0].dense.valid());  // no [V, D] tensor in the graph
  CHECK(grads[0].values.shape() == Shape{6, dim});
  CHECK(grads[0].indices.shape() == Shape{6});
  CHECK(grads[0].indices.dtype() == vkt::DType::I32);
  const Tensor dense = vkt::scatter_add_dense(grads[0].values, grads[0].indices, rows);
  vkt::Executor exec(g, {lookup, grads[0].values, grads[0].indices, dense});
  exec.run();
  CHECK(exec.read(grads[0].values) == w);  // d sum(w * lookup) / d lookup
  CHECK(exec.read_i32(grads[0].indices) == ids);
  CHECK(exec.read(lookup) == gather_rows(g.values(table), dim, ids));
  // Row 4 is looked up three times: its gradient is the sum of three rows of w.
  const Values want = scatter(Values(w.begin(), w.end()), rows, dim, ids);
  const std::vector<float> got = exec.read(dense);
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(1e-6));
  CHECK(got[4 * dim] != 0.0f);
  CHECK(got[2 * dim] == 0.0f);  // never looked up
}

TEST_CASE("scatter_add_dense adds duplicate rows up and drops indices out of range") {
  const std::int64_t rows = 9, dim = 37;  // two column blocks of 32, the second partial
  const std::vector<std::int32_t> indices{3, 0, 3, 8, -2, 3, 9, 0, 5, 8, 3};
  const auto k = static_cast<std::int64_t>(indices.size());
  const OpSpec spec{
      .name = "scatter_add_dense",
      .shapes = {Shape{k, dim}},
      .build =
          [&](const std::vector<Tensor>& in) {
            return vkt::scatter_add_dense(in[0], in[0].graph().constant_i32({k}, indices), rows);
          },
      .reference =
          [&](const std::vector<Values>& in) { return scatter(in[0], rows, dim, indices); },
  };
  const vkt::test::OpResult r = vkt::test::check_op(spec, 17);
  // Row 3 is the sum of four rows (a race or a single write would lose some).
  const Values& v = r.inputs[0];
  const double row3 = v[0 * dim + 1] + v[2 * dim + 1] + v[5 * dim + 1] + v[10 * dim + 1];
  CHECK(r.output[3 * dim + 1] == Approx(row3).margin(1e-6));
  // The same bits on every run.
  CHECK(vkt::test::check_op(spec, 17).output == r.output);
}

namespace {

struct SharedTableCase {
  const char* name;
  bool dense_use;  // the table also feeds a dense op: sparse and dense parts meet
};

}  // namespace

TEST_CASE(
    "a table used by two lookups and a dense op: accumulated gradients vs finite differences") {
  for (const SharedTableCase c : {SharedTableCase{"two lookups", false},
                                  SharedTableCase{"two lookups and a dense op", true}}) {
    INFO(c.name);
    vkt::Graph g(vkt::test::shared_device());
    const std::int64_t rows = 6, dim = 4;
    const Tensor table = g.variable("table", {rows, dim});
    const std::vector<std::int32_t> ids1{2, 5, 2}, ids2{0, 2, 7, 5};
    const std::vector<float> w1 = vkt::test::random_floats(3 * dim, 21);
    const std::vector<float> w2 = vkt::test::random_floats(4 * dim, 22);
    const std::vector<float> w3 = vkt::test::random_floats(rows * dim, 23);
    const Tensor e1 = vkt::embedding_lookup(table, g.constant_i32({3}, ids1));
    const Tensor e2 = vkt::embedding_lookup(table, g.constant_i32({2, 2}, ids2));
    Tensor loss = vkt::reduce_sum(e1 * g.constant(e1.shape(), w1)) +
                  vkt::reduce_sum(e2 * g.constant(e2.shape(), w2));
    if (c.dense_use)
      loss = loss + vkt::reduce_sum(vkt::square(table) * g.constant({rows, dim}, w3));
    const std::vector<vkt::Gradient> grads = vkt::gradients(loss, {table});
    REQUIRE(grads[0].valid());
    CHECK(grads[0].sparse() == !c.dense_use);

    Tensor dense = grads[0].dense;
    std::vector<Tensor> fetches{loss};
    if (grads[0].sparse()) {
      CHECK(grads[0].values.shape() == Shape{7, dim});  // both lookups' rows
      dense = vkt::scatter_add_dense(grads[0].values, grads[0].indices, rows);
      fetches.push_back(grads[0].indices);
    }
    fetches.push_back(dense);
    vkt::Executor exec(g, fetches);
    const std::vector<float> t0 = vkt::test::random_floats(rows * dim, 24);
    g.assign(table, t0);
    exec.run();
    if (grads[0].sparse()) {
      // Contribution order: autodiff walks back from the loss, so e2 comes first.
      CHECK(exec.read_i32(grads[0].indices) == std::vector<std::int32_t>{0, 2, 7, 5, 2, 5, 2});
    }

    const auto reference = [&](const Values& t) {
      double l = 0;
      const Values a = gather_rows(t, dim, ids1), b = gather_rows(t, dim, ids2);
      for (std::size_t i = 0; i < a.size(); ++i) l += w1[i] * a[i];
      for (std::size_t i = 0; i < b.size(); ++i) l += w2[i] * b[i];
      if (c.dense_use) {
        for (std::size_t i = 0; i < t.size(); ++i) l += w3[i] * t[i] * t[i];
      }
      return l;
    };
    Values t(t0.begin(), t0.end());
    CHECK(exec.read(loss)[0] == Approx(reference(t)).epsilon(1e-5));
    const std::vector<float> got = exec.read(dense);
    for (std::size_t i = 0; i < t.size(); ++i) {
      const double x0 = t[i], h = 1e-6;
      t[i] = x0 + h;
      const double up = reference(t);
      t[i] = x0 - h;
      const double down = reference(t);
      t[i] = x0;
      INFO("d/d table[" << i << "]");
      CHECK(got[i] == Approx((up - down) / (2 * h)).margin(2e-5));
    }
  }
}

TEST_CASE("embedding misuse is a vkt::Error naming the tensors") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor table = g.variable("table", {5, 3});
  const Tensor f32_ids = g.input("f", {4});
  const Tensor ids = g.input("ids", {2, 2, 2, 2, 2, 2}, vkt::DType::I32);
  CHECK_THAT(vkt::test::error_of([&] { vkt::embedding_lookup(table, f32_ids); }),
             Contains("must be i32"));
  CHECK_THAT(vkt::test::error_of([&] { vkt::embedding_lookup(table, ids); }), Contains("rank-7"));
  CHECK_THAT(vkt::test::error_of([&] { vkt::embedding_lookup(f32_ids, table); }),
             Contains("[V, D]"));
  const Tensor small_ids = g.input("small", {3}, vkt::DType::I32);
  CHECK_THAT(vkt::test::error_of([&] { vkt::scatter_add_dense(table, small_ids, 4); }),
             Contains("indices [3]"));
}
