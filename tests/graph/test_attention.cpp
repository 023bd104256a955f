// where, the masked scaled softmax and scaled dot-product attention (the
// composed path) against double-precision CPU references, gradients by finite
// differences, odd sizes, causal and not.
#include <cmath>

#include <vktower/runtime/graph/ops/attention.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/matmul.h>
#include <vktower/runtime/graph/ops/reduce.h>

#include "../test_support.h"
#include "op_check.h"
#include "row_kernels_scope.h"

using Catch::Matchers::Contains;
using vkt::Shape;
using vkt::Tensor;
using vkt::test::OpSpec;
using vkt::test::Values;

namespace {

/// softmax(scale * x) over rows of `tk`, key j of query i (of `tq`) masked when causal and
/// j > i + tk - tq.
Values softmax_rows(const Values& x, std::int64_t tq, std::int64_t tk, double scale, bool causal) {
  Values y(x.size());
  for (std::size_t r = 0; r < x.size() / static_cast<std::size_t>(tk); ++r) {
    const std::int64_t i = static_cast<std::int64_t>(r) % tq;
    const auto kept = [&](std::int64_t j) { return !causal || j <= i + tk - tq; };
    double m = -INFINITY, sum = 0;
    for (std::int64_t j = 0; j < tk; ++j) {
      if (kept(j)) m = std::max(m, scale * x[r * tk + j]);
    }
    for (std::int64_t j = 0; j < tk; ++j) {
      y[r * tk + j] = kept(j) ? std::exp(scale * x[r * tk + j] - m) : 0.0;
      sum += y[r * tk + j];
    }
    for (std::int64_t j = 0; j < tk; ++j) y[r * tk + j] /= sum;
  }
  return y;
}

/// softmax(q k^T scale) v per [T, D] matrix of a batch of `batches`.
Values attention(const Values& q, const Values& k, const Values& v, std::int64_t batches,
                 std::int64_t tq, std::int64_t tk, std::int64_t d, bool causal) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  Values out(static_cast<std::size_t>(batches * tq * d), 0.0);
  for (std::int64_t b = 0; b < batches; ++b) {
    Values scores(static_cast<std::size_t>(tq * tk), 0.0);
    for (std::int64_t i = 0; i < tq; ++i) {
      for (std::int64_t j = 0; j < tk; ++j) {
        for (std::int64_t c = 0; c < d; ++c) {
          scores[i * tk + j] += q[(b * tq + i) * d + c] * k[(b * tk + j) * d + c];
        }
      }
    }
    const Values p = softmax_rows(scores, tq, tk, scale, causal);
    for (std::int64_t i = 0; i < tq; ++i) {
      for (std::int64_t j = 0; j < tk; ++j) {
        for (std::int64_t c = 0; c < d; ++c) {
          out[(b * tq + i) * d + c] += p[i * tk + j] * v[(b * tk + j) * d + c];
        }
      }
    }
  }
  return out;
}

}  // namespace

TEST_CASE("where selects with broadcasting, and each branch gets dy where it was taken",
          "[attention]") {
  const OpSpec spec{.name = "where",
                    .shapes = {Shape{3, 1}, Shape{3, 5}, Shape{5}},
                    .build =
                        [](const std::vector<Tensor>& in) {
                          return vkt::where(vkt::greater(in[0], in[0].graph().scalar(0.0f)), in[1],
                                            in[2]);
                        },
                    .reference =
                        [](const std::vector<Values>& in) {
                          Values out(15);
                          for (int r = 0; r < 3; ++r) {
                            for (int c = 0; c < 5; ++c)
                              out[r * 5 + c] = in[0][r] > 0 ? in[1][r * 5 + c] : in[2][c];
                          }
                          return out;
                        },
                    .differentiable = {false, true, true},
                    .forward_tolerance = 0};
  for (const std::uint32_t seed : {1u, 2u, 3u}) vkt::test::check_op(spec, seed);
  // Rank 5, each operand broadcast along other axes.
  const Shape sc{2, 1, 3, 2, 2}, sa{2, 2, 1, 2, 2}, sb{3, 2, 2};
  const OpSpec rank5{
      .name = "where rank 5",
      .shapes = {sc, sa, sb},
      .build =
          [](const std::vector<Tensor>& in) {
            return vkt::where(vkt::greater(in[0], in[0].graph().scalar(0.0f)), in[1], in[2]);
          },
      .reference =
          [&](const std::vector<Values>& in) {
            const Shape out{2, 2, 3, 2, 2};
            Values r(static_cast<std::size_t>(out.elements()));
            for (std::int64_t j = 0; j < out.elements(); ++j) {
              const auto c = vkt::test::coords(j, out);
              r[static_cast<std::size_t>(j)] = vkt::test::at_broadcast(in[0], sc, c) > 0
                                                   ? vkt::test::at_broadcast(in[1], sa, c)
                                                   : vkt::test::at_broadcast(in[2], sb, c);
            }
            return r;
          },
      .differentiable = {false, true, true},
      .forward_tolerance = 0};
  vkt::test::check_op(rank5, 1);
  // An infinity in the branch not taken stays out (a blend would give NaN).
  vkt::Graph g(vkt::test::shared_device());
  const Tensor keep = g.constant(Shape{2}, std::vector<float>{1, 0});
  const Tensor y =
      vkt::where(keep, g.constant(Shape{2}, std::vector<float>{3, INFINITY}), g.scalar(-INFINITY));
  vkt::Executor exec(g, {y});
  exec.run();
  CHECK(exec.read(y) == std::vector<float>{3, -INFINITY});
}

TEST_CASE("masked_softmax: scaled, causal with more keys than queries, forward and gradient",
          "[attention]") {
  // 40 keys: rows long enough for a workgroup each where the device runs rows
  // so (a GPU; forced here), and an invocation each (a CPU device).
  const char* rows = GENERATE("workgroup", "invocation");
  const vkt::test::RowKernelsScope scope(rows);
  for (const Shape& shape : {Shape{2, 3, 4, 7}, Shape{1, 2, 5, 40}}) {
    for (const bool causal : {false, true}) {
      INFO(shape.str() << ", causal " << causal << ", rows by " << rows);
      const std::int64_t tq = shape[2], tk = shape[3];
      const OpSpec spec{.name = "masked_softmax",
                        .shapes = {shape},
                        .build =
                            [&](const std::vector<Tensor>& in) {
                              return vkt::masked_softmax(in[0], 0.7f, causal);
                            },
                        .reference =
                            [&](const std::vector<Values>& in) {
                              return softmax_rows(in[0], tq, tk, 0.7, causal);
                            },
                        .ranges = {{-3.0, 3.0}}};
      vkt::test::check_op(spec, 4);
    }
  }
}

TEST_CASE(
    "scaled dot-product attention, composed and fused, equals a double-precision reference, every "
    "gradient too, causal and not, rank 3 and 4",
    "[attention]") {
  struct Case {
    Shape q, kv;
    bool causal;
  };
  const auto kernel = GENERATE(vkt::AttentionKernel::Composed, vkt::AttentionKernel::Fused);
  INFO((kernel == vkt::AttentionKernel::Fused ? "fused" : "composed"));
  // 21 and 37 rows: more than one tile of the fused kernels, and not a multiple of one.
  for (const Case& c : {Case{Shape{2, 2, 5, 3}, Shape{2, 2, 5, 3}, true},
                        Case{Shape{2, 2, 3, 4}, Shape{2, 2, 5, 4}, false},
                        Case{Shape{3, 5, 4}, Shape{3, 7, 4}, true},
                        Case{Shape{1, 2, 21, 5}, Shape{1, 2, 37, 5}, true},
                        Case{Shape{1, 37, 17}, Shape{1, 21, 17}, false}}) {
    INFO("q " << c.q.str() << ", k and v " << c.kv.str() << ", causal " << c.causal);
    const int r = c.q.rank();
    const std::int64_t tq = c.q[r - 2], tk = c.kv[r - 2], d = c.q[r - 1];
    const std::int64_t batches = c.q.elements() / (tq * d);
    const OpSpec spec{.name = "scaled_dot_product_attention",
                      .shapes = {c.q, c.kv, c.kv},
                      .build =
                          [&](const std::vector<Tensor>& in) {
                            return vkt::scaled_dot_product_attention(
                                in[0], in[1], in[2], {.causal = c.causal, .kernel = kernel});
                          },
                      .reference =
                          [&](const std::vector<Values>& in) {
                            return attention(in[0], in[1], in[2], batches, tq, tk, d, c.causal);
                          }};
    vkt::test::check_op(spec, 6);
  }
}

namespace {

/// Attention's output and the gradients of sum(w * output) for q, k and v, by
/// one kernel, in a training program (dropout drops).
std::vector<std::vector<float>> attention_run(vkt::AttentionKernel kernel, const Shape& qs,
                                              const Shape& kvs, const vkt::AttentionOptions& base,
                                              std::uint32_t seed) {
  vkt::Graph g(vkt::test::shared_device(), {.seed = 7});
  const Tensor q = g.input("q", qs), k = g.input("k", kvs), v = g.input("v", kvs);
  vkt::AttentionOptions options = base;
  options.kernel = kernel;
  const Tensor y = vkt::scaled_dot_product_attention(q, k, v, options);
  const auto random = [&](const Shape& s, std::uint32_t salt) {
    return vkt::test::random_floats(static_cast<std::size_t>(s.elements()), seed + salt);
  };
  const Tensor loss = vkt::reduce_sum(y * g.constant(y.shape(), random(y.shape(), 3)));
  const std::vector<vkt::Gradient> grads = vkt::gradients(loss, {q, k, v});
  vkt::Executor exec(g, {y, grads[0].dense, grads[1].dense, grads[2].dense});
  exec.feed("q", random(qs, 0));
  exec.feed("k", random(kvs, 1));
  exec.feed("v", random(kvs, 2));
  exec.run();
  std::vector<std::vector<float>> out;
  for (const Tensor& t : {y, grads[0].dense, grads[1].dense, grads[2].dense})
    out.push_back(exec.read(t));
  return out;
}

}  // namespace

TEST_CASE(
    "fused attention equals the composed path within float rounding, forward and every "
    "gradient, with dropout on the probabilities, causal and not",
    "[attention]") {
  struct Case {
    Shape q, kv;
    bool causal;
    float dropout;
  };
  for (const Case& c : {Case{Shape{2, 3, 45, 16}, Shape{2, 3, 45, 16}, true, 0.0f},
                        Case{Shape{2, 3, 45, 16}, Shape{2, 3, 45, 16}, true, 0.25f},
                        Case{Shape{3, 19, 40}, Shape{3, 50, 40}, false, 0.1f},
                        Case{Shape{1, 2, 33, 64}, Shape{1, 2, 33, 64}, true, 0.0f}}) {
    INFO("q " << c.q.str() << ", k and v " << c.kv.str() << ", causal " << c.causal << ", dropout "
              << c.dropout);
    const vkt::AttentionOptions options{.causal = c.causal, .dropout = c.dropout};
    const auto fused = attention_run(vkt::AttentionKernel::Fused, c.q, c.kv, options, 11);
    const auto composed = attention_run(vkt::AttentionKernel::Composed, c.q, c.kv, options, 11);
    const char* names[] = {"output", "dq", "dk", "dv"};
    for (std::size_t t = 0; t < fused.size(); ++t) {
      INFO(names[t]);
      REQUIRE(fused[t].size() == composed[t].size());
      std::size_t bad = 0, zeros = 0;
      for (std::size_t i = 0; i < fused[t].size(); ++i) {
        const double want = composed[t][i];
        if (!(std::abs(fused[t][i] - want) <= 2e-5 * (1.0 + std::abs(want)))) {
          if (bad++ < 5) UNSCOPED_INFO("[" << i << "] " << fused[t][i] << " vs " << want);
        }
        zeros += want == 0.0 ? 1 : 0;
      }
      CHECK(bad == 0);
      CHECK(zeros < fused[t].size() / 10);  // values, not a vacuous match of zeros
    }
    // The same bits run to run.
    CHECK(attention_run(vkt::AttentionKernel::Fused, c.q, c.kv, options, 11) == fused);
  }
}

TEST_CASE("attention refuses shapes that do not line up, naming them", "[attention]") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor q = g.input("q", {2, 2, 3, 4});
  const Tensor k = g.input("k", {2, 2, 5, 4});
  const Tensor v = g.input("v", {2, 2, 5, 6});
  CHECK_THAT(vkt::test::error_of([&] { vkt::scaled_dot_product_attention(q, k, v); }),
             Contains("k and v need the same shape"));
  CHECK_THAT(vkt::test::error_of([&] { vkt::masked_softmax(q, NAN); }), Contains("scale is nan"));
  // Checked before either kernel is picked: the fused ones would read past k.
  const Tensor k3 = g.input("k3", {2, 3, 5, 4});
  for (const auto kernel : {vkt::AttentionKernel::Fused, vkt::AttentionKernel::Composed}) {
    CHECK_THAT(vkt::test::error_of(
                   [&] { vkt::scaled_dot_product_attention(q, k3, k3, {.kernel = kernel}); }),
               Contains("q and k differ in dimension 1 (2 and 3)"));
  }
  const Tensor other = g.input("other", {2, 3, 3, 4});
  CHECK_THAT(vkt::test::error_of([&] { vkt::matmul(q, other, false, true); }),
             Contains("the batch dimensions differ: [2, 2, 3, 4] x [2, 3, 3, 4]"));
}
