// repeat_kv: heads repeated as Hugging Face's repeat_kv repeats them, against
// a double-precision CPU reference, the gradient (the sum over each head's
// copies) by finite differences, and the build-time errors.
#include <fmt/format.h>

#include <vktower/runtime/graph/ops/repeat_kv.h>

#include "../test_support.h"
#include "op_check.h"

using Catch::Matchers::Contains;
using vkt::Shape;
using vkt::Tensor;
using vkt::test::OpSpec;
using vkt::test::Values;

namespace {

/// out[b, h, t, d] = x[b, h / n_rep, t, d] for x [B, Hkv, T, D].
Values repeat_kv_reference(const Values& x, const Shape& s, std::int64_t n_rep) {
  const std::int64_t heads = s[1] * n_rep, block = s[2] * s[3];
  Values out;
  for (std::int64_t b = 0; b < s[0]; ++b) {
    for (std::int64_t h = 0; h < heads; ++h) {
      const std::int64_t from = (b * s[1] + h / n_rep) * block;
      out.insert(out.end(), x.begin() + from, x.begin() + from + block);
    }
  }
  return out;
}

struct RepeatCase {
  Shape x;
  std::int64_t n_rep;
};

}  // namespace

TEST_CASE("repeat_kv: forward and gradient against the CPU reference", "[repeat_kv]") {
  const RepeatCase c = GENERATE(RepeatCase{Shape{2, 2, 5, 3}, 3},  // Hkv 2, n_rep 3
                                RepeatCase{Shape{1, 1, 4, 6}, 4},  // multi-query: one shared head
                                RepeatCase{Shape{3, 4, 2, 5}, 2});
  OpSpec spec{
      .name = fmt::format("repeat_kv {} n_rep {}", c.x.str(), c.n_rep),
      .shapes = {c.x},
      .build = [&](const std::vector<Tensor>& in) { return vkt::repeat_kv(in[0], c.n_rep); },
      .reference =
          [&](const std::vector<Values>& in) { return repeat_kv_reference(in[0], c.x, c.n_rep); },
  };
  vkt::test::check_op(spec, 51);
}

TEST_CASE("repeat_kv: the result's shape, n_rep 1 as x itself, and bad inputs", "[repeat_kv]") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("k", {2, 2, 5, 3});
  CHECK(vkt::repeat_kv(x, 3).shape() == Shape{2, 6, 5, 3});
  CHECK(vkt::repeat_kv(x, 1) == x);
  using vkt::test::error_of;
  CHECK_THAT(error_of([&] { vkt::repeat_kv(x, 0); }),
             Contains("repeat_kv('k' f32 [2, 2, 5, 3], n_rep 0)") && Contains("at least 1"));
  CHECK_THAT(error_of([&] {
               vkt::repeat_kv(g.input("r3", {2, 5, 3}), 2);
             }),
             Contains("must be [B, Hkv, T, D]"));
  CHECK_THAT(error_of([&] {
               vkt::repeat_kv(g.input("ids", {1, 2, 3, 4}, vkt::DType::I32), 2);
             }),
             Contains("holds i32 values"));
}
