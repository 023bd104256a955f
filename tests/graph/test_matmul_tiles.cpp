// The tiled (GPU) matmul's tile shapes: every candidate a tuning run may pick
// computes what the double-precision reference does, bit for bit what the
// default shape computes; tuning stores a shape the device can run; a stored
// shape it cannot run is ignored.
#include <fmt/format.h>

#include <cstring>
#include <string>

#include <vktower/runtime/graph/executor.h>
#include <vktower/runtime/graph/graph.h>
#include <vktower/runtime/graph/ops/conv.h>
#include <vktower/runtime/graph/ops/matmul.h>
#include <vktower/runtime/graph/ops/matmul_tiles.h>

#include "../shared_device.h"
#include "../test_support.h"
#include "matmul_variant_scope.h"

using vkt::Shape;
using vkt::Tensor;
using vkt::TiledShape;

namespace {

/// Puts `shape` in the device's tuning cache for one scope, then the default back.
class StoredShape {
 public:
  StoredShape(vkt::Device& device, const TiledShape& s) : device_(device) { store(s); }
  ~StoredShape() { store(vkt::default_tiled_shape(device_)); }
  StoredShape(const StoredShape&) = delete;
  StoredShape& operator=(const StoredShape&) = delete;

 private:
  void store(const TiledShape& s) { device_.tuning().store(vkt::kTiledShapeKey, s.values()); }
  vkt::Device& device_;
};

struct Product {
  std::vector<float> values;
  std::vector<double> reference;
};

/// `values` of an op(X) with `k` as its reduced dimension (rows of a stored
/// [k, w] when `k_rows`, else columns of a stored [w, k]), widened by `extra`
/// zeros along k.
std::vector<float> pad_k(const std::vector<float>& values, std::int64_t k, std::int64_t w,
                         bool k_rows, std::int64_t extra) {
  std::vector<float> out(static_cast<std::size_t>((k + extra) * w), 0.0f);
  for (std::int64_t i = 0; i < w; ++i)
    for (std::int64_t p = 0; p < k; ++p)
      out[k_rows ? p * w + i : i * (k + extra) + p] = values[k_rows ? p * w + i : i * k + p];
  return out;
}

/// op(A) op(B) at M x K x N on the tiled kernel with the stored shape, and in
/// double; with `pad` zeros appended along k (the same sums, another K).
Product tiled_product(std::int64_t m, std::int64_t k, std::int64_t n, bool ta, bool tb,
                      std::int64_t pad = 0) {
  vkt::Graph g(vkt::test::shared_device());
  const std::int64_t kp = k + pad;
  const Tensor a = g.input("a", ta ? Shape{kp, m} : Shape{m, kp});
  const Tensor b = g.input("b", tb ? Shape{n, kp} : Shape{kp, n});
  const Tensor c = vkt::matmul(a, b, ta, tb);
  vkt::Executor exec(g, {c});
  const std::vector<float> av = vkt::test::random_floats(m * k, 3);
  const std::vector<float> bv = vkt::test::random_floats(k * n, 5);
  exec.feed("a", pad_k(av, k, m, ta, pad));
  exec.feed("b", pad_k(bv, k, n, !tb, pad));
  exec.run();
  Product p{exec.read(c), std::vector<double>(m * n, 0.0)};
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t p_ = 0; p_ < k; ++p_)
      for (std::int64_t j = 0; j < n; ++j)
        p.reference[i * n + j] +=
            double(av[ta ? p_ * m + i : i * k + p_]) * bv[tb ? j * k + p_ : p_ * n + j];
  return p;
}

}  // namespace

TEST_CASE("matmul tiled kernel: every candidate tile shape matches the reference and the default",
          "[matmul_tiles]") {
  vkt::Device& device = vkt::test::shared_device();
  const vkt::test::VariantScope variant("tiled");
  // Ragged against every tile (16 to 256 wide, 8 to 32 deep).
  const std::int64_t m = 137, k = 45, n = 71;
  // Plain, and both operands transposed (the other staging order of each).
  for (const int flags : {0, 3}) {
    const bool ta = flags & 1, tb = flags & 2;
    std::vector<float> by_default;
    {
      const StoredShape stored(device, vkt::default_tiled_shape(device));
      by_default = tiled_product(m, k, n, ta, tb).values;
    }
    int tried = 0;
    for (const TiledShape& shape : vkt::tiled_candidates()) {
      if (!vkt::tiled_shape_fits(device, shape)) continue;
      ++tried;
      INFO(shape.str() << " transpose_a=" << ta << " transpose_b=" << tb);
      const StoredShape stored(device, shape);
      CHECK(vkt::tiled_shape(device) == shape);
      const Product p = tiled_product(m, k, n, ta, tb);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < p.values.size(); ++i) {
        if (std::abs(p.values[i] - p.reference[i]) > 1e-5 * (1 + std::abs(p.reference[i]))) ++wrong;
      }
      CHECK(wrong == 0);
      // Every shape sums over k in the same order: the same bits.
      CHECK(std::memcmp(p.values.data(), by_default.data(), p.values.size() * 4) == 0);
    }
    CHECK(tried >= 18);  // lavapipe runs all but the largest workgroups
  }
}

TEST_CASE("matmul tiled kernel: vec4 loads give the scalar loads' bits at every tile shape",
          "[matmul_tiles]") {
  vkt::Device& device = vkt::test::shared_device();
  const vkt::test::VariantScope variant("tiled");
  // Multiples of 4 (matmul_tiled_vec4), ragged against every tile; one zero
  // more along k takes the scalar kernel and adds exact zeros last.
  const std::int64_t m = 132, k = 44, n = 72;
  REQUIRE(std::string(vkt::tiled_matmul_shader(m, n, k)) == "matmul_tiled_vec4");
  REQUIRE(std::string(vkt::tiled_matmul_shader(m, n, k + 1)) == "matmul_tiled");
  for (const int flags : {0, 1, 2, 3}) {
    const bool ta = flags & 1, tb = flags & 2;
    for (const TiledShape& shape : vkt::tiled_candidates()) {
      // Every shape for the plain product; the default for the transposes.
      if (!vkt::tiled_shape_fits(device, shape) ||
          (flags != 0 && !(shape == vkt::default_tiled_shape(device)))) {
        continue;
      }
      INFO(shape.str() << " transpose_a=" << ta << " transpose_b=" << tb);
      const StoredShape stored(device, shape);
      const Product vec4 = tiled_product(m, k, n, ta, tb);
      const Product scalar = tiled_product(m, k, n, ta, tb, 1);
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < vec4.values.size(); ++i) {
        if (std::abs(vec4.values[i] - vec4.reference[i]) > 1e-5 * (1 + std::abs(vec4.reference[i])))
          ++wrong;
      }
      CHECK(wrong == 0);
      CHECK(std::memcmp(vec4.values.data(), scalar.values.data(), vec4.values.size() * 4) == 0);
    }
  }
}

TEST_CASE("matmul tiled kernel: conv2d runs on a tuned tile shape", "[matmul_tiles]") {
  vkt::Device& device = vkt::test::shared_device();
  const vkt::test::VariantScope variant("tiled");
  // A 3x3 conv, 5 -> 7 channels on 2 x 9 x 11 images, against the direct sum.
  const int nb = 2, h = 9, w = 11, ci = 5, co = 7, kh = 3, kw = 3;
  const std::vector<float> xv = vkt::test::random_floats(nb * h * w * ci, 7);
  const std::vector<float> fv = vkt::test::random_floats(kh * kw * ci * co, 9);
  for (const TiledShape shape :
       {TiledShape{128, 128, 8, 8, 8}, TiledShape{64, 128, 16, 4, 8, true}}) {
    INFO(shape.str());
    const StoredShape stored(device, shape);
    vkt::Graph g(device);
    const Tensor x = g.input("x", {nb, h, w, ci});
    const Tensor f = g.input("f", {kh, kw, ci, co});
    const Tensor y = vkt::conv2d(x, f, {.padding = vkt::Padding::Valid});
    vkt::Executor exec(g, {y});
    exec.feed("x", xv);
    exec.feed("f", fv);
    exec.run();
    const std::vector<float> got = exec.read(y);
    const int oh = h - kh + 1, ow = w - kw + 1;
    REQUIRE(got.size() == std::size_t(nb * oh * ow * co));
    std::size_t wrong = 0;
    for (int b = 0; b < nb; ++b)
      for (int i = 0; i < oh; ++i)
        for (int j = 0; j < ow; ++j)
          for (int o = 0; o < co; ++o) {
            double want = 0;
            for (int di = 0; di < kh; ++di)
              for (int dj = 0; dj < kw; ++dj)
                for (int c = 0; c < ci; ++c)
                  want += double(xv[((b * h + i + di) * w + j + dj) * ci + c]) *
                          fv[((di * kw + dj) * ci + c) * co + o];
            const float v = got[((b * oh + i) * ow + j) * co + o];
            if (std::abs(v - want) > 1e-5 * (1 + std::abs(want))) ++wrong;
          }
    CHECK(wrong == 0);
  }
}

TEST_CASE(
    "matmul tiled kernel: tuning stores a shape the device runs, and one it cannot run is ignored",
    "[matmul_tiles]") {
  vkt::Device& device = vkt::test::shared_device();
  {
    // 32 x 32 blocks and 3-wide rows: not a shape any device runs.
    device.tuning().store(vkt::kTiledShapeKey, {64, 64, 16, 32, 3, 0});
    CHECK_FALSE(vkt::stored_tiled_shape(device).has_value());
    device.tuning().store(vkt::kTiledShapeKey, {64, 64});
    CHECK_FALSE(vkt::stored_tiled_shape(device).has_value());
    device.tuning().store(vkt::kTiledShapeKey, {64, 64, 16, 4, 4, 2});
    CHECK_FALSE(vkt::stored_tiled_shape(device).has_value());
    // lavapipe is not tuned on first use: its matmuls take the texel kernel.
    if (device.info().is_lavapipe)
      CHECK(vkt::tiled_shape(device) == vkt::default_tiled_shape(device));
  }
  const TiledShape tuned = vkt::tune_tiled_shape(device, 64);
  CHECK(vkt::tiled_shape_fits(device, tuned));
  const auto stored = device.tuning().find(vkt::kTiledShapeKey);
  REQUIRE(stored.has_value());
  CHECK(*stored == tuned.values());
  CHECK(vkt::tiled_shape(device) == tuned);
  const StoredShape restore(device, vkt::default_tiled_shape(device));
}
