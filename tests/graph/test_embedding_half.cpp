// embedding_lookup on half tables: rows widened exactly (the bits of an f32
// table holding the rounded values), a frozen half variable read through
// layer_weight gathered as stored, an op's half table differentiated densely,
// and half tables bound in windows of rows on a device with 1 KiB bindings.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <vktower/vktower.h>

#include "../shared_device.h"
#include "../test_support.h"
#include "op_check.h"

using vkt::DType;
using vkt::Shape;
using vkt::Tensor;
using vkt::test::float_bits;
using vkt::test::gather_rows;
using vkt::test::rounded_to_half;

namespace {

/// Values that are no half values, with the half formats' edges among them:
/// f16 subnormals and overflow, bf16 ties, an infinity and a NaN.
std::vector<float> table_values(std::int64_t n, std::uint32_t seed) {
  std::vector<float> v = vkt::test::random_floats(n, seed, -2.0f, 2.0f);
  const float edges[] = {3e-6f,        -7e-8f,      70000.0f,
                         1.00390625f,  1.01171875f, std::numeric_limits<float>::infinity(),
                         std::nanf("")};
  for (std::size_t i = 0; i < std::size(edges) && i < v.size(); ++i) v[i * 3] = edges[i];
  return v;
}

// An odd width: rows start in the middle of a word every other row.
constexpr std::int64_t kRows = 13, kDim = 7;
const std::vector<std::int32_t> kIds{0, 12, 5, -1, 13, 5, 100, 3, 7, 1, 12, 0};

}  // namespace

TEST_CASE("a half table gives its rows widened: the bits of an f32 table of the rounded values") {
  for (const DType dtype : {DType::F16, DType::BF16}) {
    INFO(vkt::to_string(dtype));
    vkt::Graph g(vkt::test::shared_device());
    const std::vector<float> values = table_values(kRows * kDim, 3);
    const Tensor half = g.variable("half", {kRows, kDim}, vkt::Initializer::zeros(), false, dtype);
    const Tensor wide = g.variable("wide", {kRows, kDim});
    g.assign(half, values);
    g.assign(wide, rounded_to_half(values, dtype));
    const Tensor ids = g.constant_i32({3, 4}, kIds);
    const Tensor direct = vkt::embedding_lookup(half, ids);
    const Tensor through_cast = vkt::embedding_lookup(vkt::layer_weight(half), ids);
    const Tensor reference = vkt::embedding_lookup(wide, ids);
    CHECK(direct.dtype() == DType::F32);
    CHECK(direct.shape() == Shape{3, 4, kDim});
    // layer_weight's widening is gathered as stored: no cast runs.
    int casts = 0;
    for (const auto& node : g.nodes()) casts += node.op->type() == "cast";
    CHECK(casts == 1);  // made by layer_weight, consumed by nothing
    vkt::Executor exec(g, {direct, through_cast, reference});
    exec.run();
    const std::vector<float> want = gather_rows(rounded_to_half(values, dtype), kDim, kIds);
    CHECK(float_bits(exec.read(reference)) == float_bits(want));
    CHECK(float_bits(exec.read(direct)) == float_bits(want));
    CHECK(float_bits(exec.read(through_cast)) == float_bits(want));
  }
}

TEST_CASE("the gradient through an op's half table reaches the f32 weight it was cast from") {
  // loss = sum(c * lookup(cast(w, bf16))): d loss / d w is c scattered to the
  // rows looked up, exactly (the cast to half passes the gradient on as is).
  vkt::Graph g(vkt::test::shared_device());
  const Tensor w = g.variable("w", {kRows, kDim}, vkt::Initializer::uniform(-1, 1));
  const std::vector<std::int32_t> ids{4, 1, 4, 9, 0, 4};
  const Tensor lookup =
      vkt::embedding_lookup(vkt::cast(w, DType::BF16), g.constant_i32({2, 3}, ids));
  const std::vector<float> c = vkt::test::random_floats(6 * kDim, 5);
  const Tensor loss = vkt::reduce_sum(lookup * g.constant(lookup.shape(), c));
  const std::vector<vkt::Gradient> grads = vkt::gradients(loss, {w});
  REQUIRE(grads[0].valid());
  REQUIRE_FALSE(grads[0].sparse());  // the table is an op's output
  vkt::Executor exec(g, {lookup, grads[0].dense});
  exec.run();
  CHECK(float_bits(exec.read(lookup)) ==
        float_bits(gather_rows(rounded_to_half(g.values(w), DType::BF16), kDim, ids)));
  std::vector<float> want(kRows * kDim, 0.0f);
  for (std::size_t j = 0; j < ids.size(); ++j) {
    for (std::int64_t col = 0; col < kDim; ++col) {
      want[static_cast<std::size_t>(ids[j] * kDim + col)] += c[j * kDim + col];
    }
  }
  const std::vector<float> got = exec.read(grads[0].dense);
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(1e-6));
}

TEST_CASE("a half table larger than a binding is gathered in windows of rows") {
  // 1 KiB bindings: a [301, 3] half table is 1808 bytes, so it is bound in
  // windows; rows of 6 bytes put window starts on the alignment's rows only.
  vkt::Device device(
      vkt::test::shared_device().instance(), 0,
      vkt::DeviceOptions{.max_storage_buffer_range = vkt::DeviceOptions::kMinStorageBufferRange});
  const std::int64_t rows = 301, dim = 3;
  const std::vector<std::int32_t> ids{0, 300, 170, 171, 169, -4, 301, 85, 86, 255, 256, 1, 299};
  for (const DType dtype : {DType::F16, DType::BF16}) {
    INFO(vkt::to_string(dtype));
    vkt::Graph g(device);
    const Tensor table = g.variable("table", {rows, dim}, vkt::Initializer::zeros(), false, dtype);
    const std::vector<float> values = table_values(rows * dim, 7);
    g.assign(table, values);
    const Tensor lookup = vkt::embedding_lookup(table, g.constant_i32({13}, ids));
    vkt::Executor exec(g, {lookup});
    exec.run();
    CHECK(float_bits(exec.read(lookup)) ==
          float_bits(gather_rows(rounded_to_half(values, dtype), dim, ids)));
  }
}
