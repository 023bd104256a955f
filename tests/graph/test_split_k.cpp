// Split-K on the tiled (GPU) kernel: products whose output tiles are too few
// for the device and whose k is long are computed as partial sums over slices
// of k, summed in slice order (matmul_tiles.h's KSplit, sum_slices). Checked
// against double references, gradients through the split, the same bits on
// every tile shape and every run, and conv2d's filter gradient split too.
#include <fmt/format.h>

#include <cstring>

#include <vktower/runtime/graph/autodiff.h>
#include <vktower/runtime/graph/executor.h>
#include <vktower/runtime/graph/graph.h>
#include <vktower/runtime/graph/ops/conv.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/matmul.h>
#include <vktower/runtime/graph/ops/matmul_tiles.h>
#include <vktower/runtime/graph/ops/reduce.h>

#include "../shared_device.h"
#include "../test_support.h"
#include "matmul_variant_scope.h"

using vkt::KSplit;
using vkt::Shape;
using vkt::Tensor;
using vkt::TiledShape;

namespace {

bool has_node(const vkt::Graph& g, const std::string& type) {
  for (const vkt::Node& node : g.nodes()) {
    if (node.op->type() == type) return true;
  }
  return false;
}

/// C = A [m, k] B [k, n] on the tiled kernel with `shape` stored as the tuned one.
std::vector<float> tiled_product(const TiledShape& shape, std::int64_t m, std::int64_t k,
                                 std::int64_t n) {
  vkt::Device& device = vkt::test::shared_device();
  device.tuning().store(vkt::kTiledShapeKey, shape.values());
  vkt::Graph g(device);
  const Tensor a = g.input("a", {m, k}), b = g.input("b", {k, n});
  const Tensor c = vkt::matmul(a, b);
  CHECK(has_node(g, "matmul_split_k"));
  CHECK(has_node(g, "sum_slices"));
  vkt::Executor exec(g, {c});
  exec.feed("a", vkt::test::random_floats(m * k, 11));
  exec.feed("b", vkt::test::random_floats(k * n, 12));
  exec.run();
  std::vector<float> values = exec.read(c);
  device.tuning().store(vkt::kTiledShapeKey, vkt::default_tiled_shape(device).values());
  return values;
}

}  // namespace

TEST_CASE("split-K: which products are split, and into what", "[split_k]") {
  // The CNN's filter gradients: a 25 x 16 output over 12544 pixels.
  const KSplit conv1 = vkt::split_k(25, 16, 12544);
  CHECK(conv1.slices == 98);
  CHECK(conv1.kslice == 128);
  // Every slice at least 128 deep, the slices cover k and no slice is empty.
  for (const auto& [m, n, k] : std::vector<std::array<std::int64_t, 3>>{
           {25, 16, 12544}, {288, 32, 50176}, {256, 784, 1024}, {3, 2, 1000}, {1, 1, 1 << 20}}) {
    const KSplit s = vkt::split_k(m, n, k);
    INFO(m << " x " << n << " x " << k << ": " << s.slices << " slices of " << s.kslice);
    REQUIRE(s.split());
    CHECK(s.kslice >= 128);
    CHECK(s.slices <= 256);
    CHECK(std::int64_t{s.slices} * s.kslice >= k);
    CHECK(std::int64_t{s.slices - 1} * s.kslice < k);
  }
  // Enough output tiles already, or too little k to share: not split.
  CHECK_FALSE(vkt::split_k(4096, 4096, 4096).split());
  CHECK_FALSE(vkt::split_k(1024, 1024, 100000).split());
  CHECK_FALSE(vkt::split_k(7, 5, 255).split());
  CHECK_FALSE(vkt::split_k(256, 1024, 255).split());
}

TEST_CASE("split-K matmul: values and gradients against double, all transpose flags", "[split_k]") {
  const vkt::test::VariantScope variant("tiled");
  // The forward product split (m x n small, k long), and dB = op(A)^T dy
  // split too (k x n over m); k not a multiple of any slab depth.
  struct Dims {
    std::int64_t m, k, n;
  };
  for (const Dims d : {Dims{300, 600, 3}, Dims{19, 1001, 13}}) {
    for (int flags = 0; flags < 4; ++flags) {
      const bool ta = flags & 1, tb = flags & 2;
      INFO(fmt::format("M={} K={} N={} transpose_a={} transpose_b={}", d.m, d.k, d.n, ta, tb));
      vkt::Graph g(vkt::test::shared_device());
      const Tensor a = g.input("a", ta ? Shape{d.k, d.m} : Shape{d.m, d.k});
      const Tensor b = g.input("b", tb ? Shape{d.n, d.k} : Shape{d.k, d.n});
      const std::vector<float> av = vkt::test::random_floats(d.m * d.k, 31 + flags);
      const std::vector<float> bv = vkt::test::random_floats(d.k * d.n, 41 + flags);
      const std::vector<float> wv = vkt::test::random_floats(d.m * d.n, 51 + flags);
      const Tensor c = vkt::matmul(a, b, ta, tb);
      CHECK(has_node(g, "sum_slices"));
      const Tensor loss = vkt::reduce_sum(vkt::mul(c, g.constant({d.m, d.n}, wv)));
      const std::vector<vkt::Gradient> grads = vkt::gradients(loss, {a, b});
      vkt::Executor exec(g, {c, grads[0].dense, grads[1].dense});
      exec.feed("a", av);
      exec.feed("b", bv);
      exec.run();
      // op(A)[i, p] and op(B)[p, j] as stored, and the references in double:
      // C = op(A) op(B); dop(A) = W op(B)^T; dop(B) = op(A)^T W.
      const auto ai = [&](std::int64_t i, std::int64_t p) {
        return static_cast<std::size_t>(ta ? p * d.m + i : i * d.k + p);
      };
      const auto bi = [&](std::int64_t p, std::int64_t j) {
        return static_cast<std::size_t>(tb ? j * d.k + p : p * d.n + j);
      };
      std::vector<double> cw(d.m * d.n, 0.0), da(d.m * d.k, 0.0), db(d.k * d.n, 0.0);
      for (std::int64_t i = 0; i < d.m; ++i)
        for (std::int64_t p = 0; p < d.k; ++p)
          for (std::int64_t j = 0; j < d.n; ++j) {
            cw[i * d.n + j] += double(av[ai(i, p)]) * bv[bi(p, j)];
            da[ai(i, p)] += double(wv[i * d.n + j]) * bv[bi(p, j)];
            db[bi(p, j)] += double(av[ai(i, p)]) * wv[i * d.n + j];
          }
      const auto wrong = [](const std::vector<float>& got, const std::vector<double>& want) {
        REQUIRE(got.size() == want.size());
        std::size_t n = 0;
        for (std::size_t i = 0; i < got.size(); ++i) {
          if (std::abs(got[i] - want[i]) > 1e-4 * (1 + std::abs(want[i]))) ++n;
        }
        return n;
      };
      CHECK(wrong(exec.read(c), cw) == 0);
      CHECK(wrong(exec.read(grads[0].dense), da) == 0);
      CHECK(wrong(exec.read(grads[1].dense), db) == 0);
    }
  }
}

TEST_CASE("split-K matmul: the same bits on every tile shape and every run", "[split_k]") {
  const vkt::test::VariantScope variant("tiled");
  vkt::Device& device = vkt::test::shared_device();
  const std::int64_t m = 21, k = 1500, n = 10;
  const std::vector<float> first = tiled_product(vkt::default_tiled_shape(device), m, k, n);
  CHECK(tiled_product(vkt::default_tiled_shape(device), m, k, n) == first);
  for (const TiledShape shape : {TiledShape{64, 64, 16, 4, 4}, TiledShape{64, 128, 16, 4, 8, true},
                                 TiledShape{128, 64, 16, 8, 4}}) {
    if (!vkt::tiled_shape_fits(device, shape)) continue;
    INFO(shape.str());
    const std::vector<float> got = tiled_product(shape, m, k, n);
    CHECK(std::memcmp(got.data(), first.data(), first.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("split-K conv2d: the filter gradient over many pixels against double", "[split_k]") {
  const vkt::test::VariantScope variant("tiled");
  // 3x3, 3 -> 5 channels on 4 x 16 x 16 images: the filter gradient is a
  // 27 x 5 output over 4 * 14 * 14 = 784 pixels, split.
  const int nb = 4, h = 16, w = 16, ci = 3, co = 5, kh = 3, kw = 3, oh = h - 2, ow = w - 2;
  REQUIRE(vkt::split_k(kh * kw * ci, co, nb * oh * ow).split());
  const std::vector<float> xv = vkt::test::random_floats(nb * h * w * ci, 21);
  const std::vector<float> rv = vkt::test::random_floats(nb * oh * ow * co, 23);
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", {nb, h, w, ci});
  const Tensor f = g.input("f", {kh, kw, ci, co});
  const Tensor r = g.input("r", {nb, oh, ow, co});
  const Tensor loss =
      vkt::reduce_sum(vkt::mul(vkt::conv2d(x, f, {.padding = vkt::Padding::Valid}), r));
  const std::vector<vkt::Gradient> grads = vkt::gradients(loss, {f});
  REQUIRE(grads[0].dense.valid());
  CHECK(has_node(g, "conv2d_backprop_filter_split_k"));
  vkt::Executor exec(g, {grads[0].dense});
  exec.feed("x", xv);
  exec.feed("r", rv);  // f: the gradient does not read it
  exec.run();
  const std::vector<float> got = exec.read(grads[0].dense);
  // d loss / d f[di, dj, c, o] = sum over images and output pixels of x * r.
  std::size_t wrong = 0;
  for (int di = 0; di < kh; ++di)
    for (int dj = 0; dj < kw; ++dj)
      for (int c = 0; c < ci; ++c)
        for (int o = 0; o < co; ++o) {
          double want = 0;
          for (int b = 0; b < nb; ++b)
            for (int i = 0; i < oh; ++i)
              for (int j = 0; j < ow; ++j)
                want += double(xv[((b * h + i + di) * w + j + dj) * ci + c]) *
                        rv[((b * oh + i) * ow + j) * co + o];
          const float v = got[((di * kw + dj) * ci + c) * co + o];
          if (std::abs(v - want) > 1e-4 * (1 + std::abs(want))) ++wrong;
        }
  CHECK(wrong == 0);
}

TEST_CASE("tuning on a device whose bindings are smaller than the tuning product",
          "[matmul_tiles]") {
  // A device with 1 KiB bindings: tuning must not bind its 16 MiB operands
  // (it did, and every first matmul on such a GPU threw); it keeps the default.
  vkt::Device device(
      vkt::test::shared_device().instance(), 0,
      vkt::DeviceOptions{.max_storage_buffer_range = vkt::DeviceOptions::kMinStorageBufferRange});
  TiledShape tuned;
  CHECK_NOTHROW(tuned = vkt::tune_tiled_shape(device));
  CHECK(tuned == vkt::default_tiled_shape(device));
}

TEST_CASE("small products take 64 x 64 tiles where the tuned tiles leave them few workgroups",
          "[matmul_tiles]") {
  vkt::Device& device = vkt::test::shared_device();
  const TiledShape big{128, 128, 8, 8, 8};
  REQUIRE(vkt::tiled_shape_fits(device, big));
  device.tuning().store(vkt::kTiledShapeKey, big.values());
  // The MLP's 256 x 1024 outputs: 16 tiles of 128 x 128, 64 of 64 x 64.
  CHECK(vkt::tiled_shape_for(device, 256, 1024) == TiledShape{64, 64, 8, 4, 4});
  CHECK(vkt::tiled_shape_for(device, 4096, 4096) == big);
  // A split product counts its slices: 98 slices of one tile are still few.
  CHECK(vkt::tiled_shape_for(device, 25, 16, 98) == TiledShape{64, 64, 8, 4, 4});
  CHECK(vkt::tiled_shape_for(device, 256, 1024, 8) == big);
  device.tuning().store(vkt::kTiledShapeKey, vkt::default_tiled_shape(device).values());
}
