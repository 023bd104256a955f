// permute and transpose: every axis order of rank 3 and 4 (odd sizes) against
// a CPU gather, gradients by finite differences, i32, half tensors, views,
// and bad orders.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include <vktower/runtime/graph/half.h>
#include <vktower/runtime/graph/ops/cast.h>
#include <vktower/runtime/graph/ops/shape_ops.h>

#include "../test_support.h"
#include "op_check.h"

using Catch::Matchers::Contains;
using vkt::Shape;
using vkt::Tensor;
using vkt::test::OpSpec;
using vkt::test::Values;

namespace {

/// x (row-major, `shape`) with its axes in the order `perm`, on the CPU.
template <class T>
std::vector<T> permuted(const std::vector<T>& x, const Shape& shape, const std::vector<int>& perm) {
  const int rank = shape.rank();
  std::vector<std::int64_t> strides(static_cast<std::size_t>(rank), 1);
  for (int k = rank - 2; k >= 0; --k) strides[k] = strides[k + 1] * shape[k + 1];
  std::vector<std::int64_t> out_dims(static_cast<std::size_t>(rank));
  for (int k = 0; k < rank; ++k) out_dims[k] = shape[perm[k]];
  std::vector<T> out(x.size());
  std::vector<std::int64_t> c(static_cast<std::size_t>(rank), 0);
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::int64_t from = 0;
    for (int k = 0; k < rank; ++k) from += c[k] * strides[perm[k]];
    out[i] = x[static_cast<std::size_t>(from)];
    for (int k = rank - 1; k >= 0 && ++c[k] == out_dims[k]; --k) c[k] = 0;
  }
  return out;
}

/// permute against permuted(), forward and gradient.
void check_permute(const Shape& shape, const std::vector<int>& perm) {
  INFO("shape " << shape.str() << ", order " << fmt::format("{}", fmt::join(perm, ",")));
  const OpSpec spec{
      .name = "permute",
      .shapes = {shape},
      .build = [&](const std::vector<Tensor>& in) { return vkt::permute(in[0], perm); },
      .reference = [&](const std::vector<Values>& in) { return permuted(in[0], shape, perm); },
      .forward_tolerance = 0};
  vkt::test::check_op(spec, 3);
}

}  // namespace

TEST_CASE("permute: every axis order of rank 3 and 4, forward and gradient", "[permute]") {
  for (const Shape& shape : {Shape{3, 5, 7}, Shape{2, 3, 5, 7}}) {
    std::vector<int> perm(static_cast<std::size_t>(shape.rank()));
    std::iota(perm.begin(), perm.end(), 0);
    do {
      check_permute(shape, perm);
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
}

TEST_CASE("permute: a last axis of a multiple of 4 that stays last goes 4 elements at a time",
          "[permute]") {
  // Every order of rank 3, and of rank 4 those keeping the last axis (the
  // others take the element-wise kernel), and the heads' orders of attention.
  for (const Shape& shape : {Shape{3, 5, 8}, Shape{2, 3, 5, 4}}) {
    std::vector<int> perm(static_cast<std::size_t>(shape.rank()));
    std::iota(perm.begin(), perm.end(), 0);
    do {
      if (shape.rank() == 3 || perm.back() == 3) check_permute(shape, perm);
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
  check_permute(Shape{2, 3, 3, 2, 8}, {2, 0, 3, 1, 4});  // [B, T, 3, H, Dh] -> [3, B, H, T, Dh]
  check_permute(Shape{2, 2, 3, 12}, {0, 2, 1, 3});       // [B, H, T, Dh] -> [B, T, H, Dh]
}

TEST_CASE("permute: rank 5 and 6 (a fused projection's heads moved out), forward and gradient",
          "[permute]") {
  const std::vector<std::pair<Shape, std::vector<int>>> cases = {
      {Shape{2, 3, 3, 2, 5}, {2, 0, 3, 1, 4}},  // [B, T, 3, H, D] -> [3, B, H, T, D]
      {Shape{2, 3, 1, 4, 5}, {4, 3, 2, 1, 0}},
      {Shape{2, 3, 2, 1, 3, 2}, {5, 0, 4, 1, 3, 2}},
      {Shape{2, 3, 2, 2, 3, 2}, {1, 0, 3, 2, 5, 4}}};
  for (const auto& [shape, perm] : cases) check_permute(shape, perm);
}

TEST_CASE("transpose swaps two axes (the last two by default), and i32 permutes too", "[permute]") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", {2, 3, 4});
  CHECK(vkt::transpose(x).shape() == Shape{2, 4, 3});
  CHECK(vkt::transpose(x, 0, -1).shape() == Shape{4, 3, 2});
  const Tensor ids = g.input("ids", {2, 3}, vkt::DType::I32);
  const Tensor t = vkt::transpose(ids);
  CHECK(t.dtype() == vkt::DType::I32);
  // Only axes of size 1 move: the same elements in the same order, no copy.
  const Tensor one = g.input("one", {3, 1, 4});
  CHECK(vkt::permute(one, {1, 0, 2}).shape() == Shape{1, 3, 4});
  CHECK(g.nodes().back().op->type() != "permute");
  CHECK(vkt::permute(one, {0, 1, 2}).id() == one.id());
  vkt::Executor exec(g, {t});
  const std::vector<std::int32_t> values = {1, 2, 3, -4, 5, 2147483647};
  exec.feed("ids", values);
  exec.run();
  CHECK(exec.read_i32(t) == permuted(values, Shape{2, 3}, {1, 0}));
}

TEST_CASE("permute refuses an order that is not one of the tensor's axes each once", "[permute]") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", {2, 3, 4});
  CHECK_THAT(vkt::test::error_of([&] {
               vkt::permute(x, {0, 1});
             }),
             Contains("2 axes for a rank-3 tensor"));
  CHECK_THAT(vkt::test::error_of([&] {
               vkt::permute(x, {0, 2, -1});
             }),
             Contains("axis -1 appears twice in (0, 2, -1)"));
  CHECK_THAT(vkt::test::error_of([&] { vkt::permute(x, {0, 1, 3}); }), Contains("3"));
}

TEST_CASE(
    "permute moves half tensors whose last axis stays last and is even, word by word, "
    "forward and gradient, and names the fix otherwise",
    "[permute]") {
  // [B, H, T, Dh] -> [B, T, H, Dh] with Dh 2 (the one-word kernel) and 8
  // (four words an invocation), and [B, T, 3, H, Dh] -> [3, B, H, T, Dh].
  const std::vector<std::pair<Shape, std::vector<int>>> cases = {
      {Shape{2, 3, 5, 2}, {0, 2, 1, 3}},
      {Shape{2, 2, 3, 8}, {0, 2, 1, 3}},
      {Shape{2, 3, 3, 2, 6}, {2, 0, 3, 1, 4}}};
  for (const vkt::DType half : {vkt::DType::F16, vkt::DType::BF16}) {
    for (const auto& [shape, perm] : cases) {
      INFO(vkt::to_string(half) << " " << shape.str());
      vkt::Graph g(vkt::test::shared_device());
      const Tensor x = g.input("x", shape);
      const Tensor y = vkt::permute(vkt::cast(x, half), perm);
      CHECK(y.dtype() == half);
      const Tensor c = g.input("c", y.shape());
      const Tensor yf = vkt::cast(y, vkt::DType::F32);
      const Tensor dx = vkt::gradients(vkt::reduce_sum(yf * c), {x})[0].dense;
      vkt::Executor exec(g, {yf, dx});
      const std::vector<float> xv = vkt::test::random_floats(shape.elements(), 31, -3.0f, 3.0f);
      const std::vector<float> cv = vkt::test::random_floats(shape.elements(), 32, -3.0f, 3.0f);
      exec.feed("x", xv);
      exec.feed("c", cv);
      exec.run();
      const auto rounded = [&](const std::vector<float>& v) {
        return vkt::test::rounded_to_half(v, half);
      };
      // Every element rounded once and moved: the CPU gather of the rounded x.
      CHECK(exec.read(yf) == permuted(rounded(xv), shape, perm));
      // dx is c rounded, moved back by the inverse order.
      std::vector<int> inverse(perm.size());
      for (std::size_t k = 0; k < perm.size(); ++k) inverse[perm[k]] = static_cast<int>(k);
      CHECK(exec.read(dx) == permuted(rounded(cv), y.shape(), inverse));
    }
  }
  vkt::Graph g(vkt::test::shared_device());
  const Tensor odd = vkt::cast(g.input("odd", {2, 3, 5}), vkt::DType::F16);
  CHECK_THAT(
      vkt::test::error_of([&] {
        vkt::permute(odd, {1, 0, 2});
      }),
      Contains("f16") && Contains("last axis kept last and of even size") && Contains("vkt::cast"));
  const Tensor even = vkt::cast(g.input("even", {2, 3, 4}), vkt::DType::BF16);
  CHECK_THAT(vkt::test::error_of([&] {
               vkt::permute(even, {0, 2, 1});
             }),
             Contains("bf16") && Contains("last axis kept last"));
}
