// conv2d (both kernel variants) and its two gradients against a double-precision
// CPU convolution and finite differences (op_check.h), layers::conv2d, a small
// conv model on 2 towers against 1, and the build-time errors.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <random>

#include <vktower/optimizers/sgd.h>
#include <vktower/optimizers/tower_optimizer.h>
#include <vktower/runtime/graph/ops/conv.h>
#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/runtime/graph/ops/matmul.h>
#include <vktower/runtime/graph/ops/shape_ops.h>
#include <vktower/runtime/vulkan/instance.h>
#include <vktower/tower/replicate.h>
#include <vktower/tower/tower_run.h>

#include "../test_support.h"
#include "../tower_devices.h"
#include "matmul_variant_scope.h"
#include "op_check.h"

using vkt::Conv2dOptions;
using vkt::Padding;
using vkt::Shape;
using vkt::Tensor;
using vkt::test::OpSpec;
using vkt::test::Values;

using vkt::test::VariantScope;

namespace {

struct Case {
  const char* name;
  Shape x;                             // [N, H, W, C]
  std::array<std::int64_t, 2> kernel;  // KH, KW
  std::int64_t filters;
  Conv2dOptions options;
};

/// The padding before the rows and columns, as TensorFlow places it.
std::array<std::int64_t, 2> pad_before(const Case& c, std::int64_t oh, std::int64_t ow) {
  if (c.options.padding == Padding::Explicit)
    return {c.options.explicit_padding[0], c.options.explicit_padding[2]};
  if (c.options.padding == Padding::Valid) return {0, 0};
  const auto before = [](std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t s,
                         std::int64_t d) {
    return std::max<std::int64_t>((out - 1) * s + (k - 1) * d + 1 - in, 0) / 2;
  };
  return {before(c.x[1], oh, c.kernel[0], c.options.strides[0], c.options.dilations[0]),
          before(c.x[2], ow, c.kernel[1], c.options.strides[1], c.options.dilations[1])};
}

/// conv2d in double, straight from its definition.
Values conv_reference(const Case& c, const Shape& y, const Values& x, const Values& w) {
  const std::int64_t n = c.x[0], h = c.x[1], wd = c.x[2], ch = c.x[3];
  const std::int64_t oh = y[1], ow = y[2], o = y[3], groups = c.options.groups;
  const std::int64_t cg = ch / groups, og = o / groups;
  const auto pad = pad_before(c, oh, ow);
  Values out(static_cast<std::size_t>(y.elements()), 0.0);
  for (std::int64_t b = 0; b < n; ++b)
    for (std::int64_t i = 0; i < oh; ++i)
      for (std::int64_t j = 0; j < ow; ++j)
        for (std::int64_t f = 0; f < o; ++f) {
          double s = 0;
          const std::int64_t grp = f / og;
          for (std::int64_t p = 0; p < c.kernel[0]; ++p)
            for (std::int64_t q = 0; q < c.kernel[1]; ++q) {
              const std::int64_t r = i * c.options.strides[0] + p * c.options.dilations[0] - pad[0];
              const std::int64_t t = j * c.options.strides[1] + q * c.options.dilations[1] - pad[1];
              if (r < 0 || r >= h || t < 0 || t >= wd) continue;
              for (std::int64_t k = 0; k < cg; ++k) {
                s += x[static_cast<std::size_t>(((b * h + r) * wd + t) * ch + grp * cg + k)] *
                     w[static_cast<std::size_t>(((p * c.kernel[1] + q) * cg + k) * o + f)];
              }
            }
          out[static_cast<std::size_t>(((b * oh + i) * ow + j) * o + f)] = s;
        }
  return out;
}

/// Forward values and both gradients of `c` with the kernel variant `variant`.
void check_conv(const char* variant, const Case& c, std::uint32_t seed) {
  const VariantScope scope(variant);
  REQUIRE(
      vkt::matmul_variant(vkt::test::shared_device()) ==
      (std::string(variant) == "texel" ? vkt::MatmulVariant::Texel : vkt::MatmulVariant::Tiled));
  const Shape filter{c.kernel[0], c.kernel[1], c.x[3] / c.options.groups, c.filters};
  std::optional<Shape> y;
  OpSpec spec{
      .name = fmt::format("{} conv2d {}: x {} filter {}", variant, c.name, c.x.str(), filter.str()),
      .shapes = {c.x, filter},
      .build =
          [&](const std::vector<Tensor>& in) {
            const Tensor out = vkt::conv2d(in[0], in[1], c.options);
            y = out.shape();
            return out;
          },
      .reference =
          [&](const std::vector<Values>& in) { return conv_reference(c, *y, in[0], in[1]); },
  };
  vkt::test::check_op(spec, seed);
}

Conv2dOptions opts(std::array<std::int64_t, 2> strides, Padding padding,
                   std::array<std::int64_t, 2> dilations = {1, 1}, std::int64_t groups = 1,
                   std::array<std::int64_t, 4> explicit_padding = {0, 0, 0, 0}) {
  return {.strides = strides,
          .padding = padding,
          .explicit_padding = explicit_padding,
          .dilations = dilations,
          .groups = groups};
}

// 7x5 images, batch 2: odd sizes everywhere, channels 3 (4 consecutive k then
// straddle taps, each read alone) and in fours (whole texels).
const std::vector<Case> kCases = {
    {"3x3 valid", {2, 7, 5, 3}, {3, 3}, 4, opts({1, 1}, Padding::Valid)},
    {"3x2 stride 2 same", {2, 7, 5, 3}, {3, 2}, 5, opts({2, 2}, Padding::Same)},
    {"2x3 stride 2x1 explicit dilation 2x1",
     {2, 7, 5, 3},
     {2, 3},
     6,
     opts({2, 1}, Padding::Explicit, {2, 1}, 1, {1, 0, 2, 1})},
    {"3x3 same dilation 2 groups 3",
     {2, 7, 5, 3},
     {3, 3},
     6,
     opts({1, 1}, Padding::Same, {2, 2}, 3)},
    {"depthwise 3x3 stride 2 valid",
     {2, 7, 5, 3},
     {3, 3},
     3,
     opts({2, 2}, Padding::Valid, {1, 1}, 3)},
    {"depthwise x2 2x2 same stride 2",
     {2, 7, 5, 3},
     {2, 2},
     6,
     opts({2, 2}, Padding::Same, {1, 1}, 3)},
    {"channels in fours, groups 2, 3x3 same",
     {2, 7, 5, 8},
     {3, 3},
     8,
     opts({1, 1}, Padding::Same, {1, 1}, 2)},
    {"channels in fours, stride 2 explicit dilation 2",
     {2, 7, 5, 4},
     {2, 2},
     8,
     opts({2, 2}, Padding::Explicit, {2, 2}, 1, {2, 1, 0, 3})},
    {"40 filters (2-texel block)", {1, 5, 4, 4}, {2, 2}, 40, opts({1, 1}, Padding::Valid)},
    // 16 filters and 3 input channels over 520 pixels: the forward and input
    // gradient blocks put 4 lanes across and 4 down (texel_view.h).
    {"16 filters over 520 pixels, 3x3 same",
     {2, 20, 13, 3},
     {3, 3},
     16,
     opts({1, 1}, Padding::Same)},
    // 4-texel blocks, two of them (128 columns) and three tiles (64) across.
    {"136 filters, 3 channels", {1, 4, 3, 3}, {2, 2}, 136, opts({1, 1}, Padding::Same)},
};

}  // namespace

TEST_CASE("conv2d texel kernel: forward and both gradients against the CPU", "[conv]") {
  for (std::size_t i = 0; i < kCases.size(); ++i) {
    check_conv("texel", kCases[i], static_cast<std::uint32_t>(100 + i));
  }
}

TEST_CASE("conv2d tiled kernel: forward and both gradients against the CPU", "[conv]") {
  for (std::size_t i = 0; i < kCases.size(); ++i) {
    check_conv("tiled", kCases[i], static_cast<std::uint32_t>(200 + i));
  }
}

TEST_CASE("layers::conv2d: variables, reuse by name, and values against the CPU", "[conv]") {
  vkt::Graph g(vkt::test::shared_device(), {.seed = 4});
  const Case c{"layer", {2, 7, 5, 3}, {3, 2}, 6, opts({2, 1}, Padding::Same, {1, 1}, 3)};
  const Tensor x = g.input("x", c.x);
  const Tensor y =
      vkt::layers::conv2d(x, 6, {3, 2}, c.options, vkt::layers::Activation::Relu, "conv");
  CHECK(y.shape() == Shape{2, 4, 5, 6});
  const Tensor kernel = *g.find_variable("conv/kernel"), bias = *g.find_variable("conv/bias");
  CHECK(kernel.shape() == Shape{3, 2, 1, 6});
  CHECK(bias.shape() == Shape{6});
  const std::size_t variables = g.variables().size();
  vkt::layers::conv2d(x, 6, {3, 2}, c.options, vkt::layers::Activation::None, "conv");
  CHECK(g.variables().size() == variables);
  CHECK_THAT(vkt::test::error_of([&] {
               vkt::layers::conv2d(x, 6, {3, 3}, c.options, vkt::layers::Activation::None, "conv");
             }),
             Catch::Contains("conv/kernel"));
  // glorot_uniform over fan_in = 3 * 2 * 1, fan_out = 3 * 2 * 6.
  const std::vector<float> w = g.values(kernel);
  const float limit = std::sqrt(6.0f / (6 + 36));
  CHECK(std::all_of(w.begin(), w.end(), [&](float v) { return std::abs(v) <= limit; }));
  CHECK(g.values(bias) == std::vector<float>(6, 0.0f));
  const std::vector<float> b = vkt::test::random_floats(6, 12);
  g.assign(bias, b);

  vkt::Executor exec(g, {y});
  const std::vector<float> xv =
      vkt::test::random_floats(static_cast<std::size_t>(c.x.elements()), 13);
  exec.feed("x", xv);
  exec.run();
  const std::vector<float> got = exec.read(y);
  const Values conv =
      conv_reference(c, y.shape(), Values(xv.begin(), xv.end()), Values(w.begin(), w.end()));
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double want = std::max(conv[i] + b[i % 6], 0.0);
    if (!vkt::test::close_enough(got[i], want, 1e-5) && wrong++ < 5)
      UNSCOPED_INFO("y[" << i << "] = " << got[i] << ", expected " << want);
  }
  CHECK(wrong == 0);
}

TEST_CASE("a small conv model trained with SGD on 2 towers matches 1 tower", "[conv]") {
  const auto model = [](vkt::ModelContext&, const vkt::TensorDict& f, const vkt::TensorDict& l,
                        vkt::Mode mode, const vkt::Params&) {
    const Tensor x = f.at("x");
    const Tensor h =
        vkt::layers::conv2d(x, 4, {3, 3}, {.strides = {2, 2}, .padding = Padding::Same},
                            vkt::layers::Activation::Tanh, "conv");
    const Tensor flat = vkt::reshape(h, {h.shape()[0], h.shape().elements() / h.shape()[0]});
    const Tensor logits = vkt::layers::dense(flat, 3, vkt::layers::Activation::None, "out");
    const Tensor loss = vkt::sparse_softmax_cross_entropy(l.at("y"), logits);
    vkt::TowerOptimizer sgd([] { return std::make_unique<vkt::SGD>(0.2f); });
    return vkt::EstimatorSpec{.mode = mode, .loss = loss, .train_op = sgd.minimize(loss)};
  };
  const std::int64_t batch = 4;
  const Shape xs{batch, 5, 5, 2};
  std::mt19937 rng(3);
  std::vector<vkt::HostBatch> xb, yb;
  for (int s = 0; s < 4; ++s) {
    const std::vector<float> x =
        vkt::test::random_floats(static_cast<std::size_t>(xs.elements()), 30 + s);
    std::vector<std::int32_t> y(batch);
    for (auto& v : y) v = static_cast<std::int32_t>(rng() % 3);
    xb.push_back({{"x", vkt::HostTensor::floats(xs, x)}});
    yb.push_back({{"y", vkt::HostTensor::ints({batch}, y)}});
  }
  const auto train = [&](int towers) {
    vkt::Instance instance;
    const auto replicated =
        vkt::replicate_model_fn(model, {.devices = std::vector<std::uint32_t>(towers, 0)});
    vkt::ModelContext root(instance, {{"x", {xs}}}, {{"y", {{batch}, vkt::DType::I32}}},
                           {.seed = 5});
    root.set_device_pool(&vkt::test::tower_devices());
    vkt::EstimatorSpec spec = replicated(root, {}, {}, vkt::Mode::Train, {});
    for (int s = 0; s < 4; ++s) spec.run->train_step(xb[s], yb[s]);
    std::vector<std::vector<float>> vars;
    for (const char* name : {"conv/kernel", "conv/bias", "out/kernel", "out/bias"})
      vars.push_back(spec.run->variable(name));
    return vars;
  };
  const auto one = train(1);
  const auto two = train(2);
  for (std::size_t v = 0; v < one.size(); ++v) {
    INFO("variable " << v);
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < one[v].size(); ++i) {
      diff = std::max<double>(diff, std::abs(two[v][i] - one[v][i]));
      scale = std::max<double>(scale, std::abs(one[v][i]));
    }
    CHECK(scale > 0);
    CHECK(diff <= 1e-5 * scale);
  }
}

TEST_CASE("conv2d errors say what is wrong and how to fix it, when the graph is built", "[conv]") {
  vkt::Graph g(vkt::test::shared_device());
  const Tensor x = g.input("x", {2, 7, 5, 3});
  const Tensor w = g.input("w", {3, 3, 3, 4});
  const auto error = [](auto&& fn) { return vkt::test::error_of(fn); };
  CHECK_THAT(error([&] {
               vkt::conv2d(g.input("flat", {7, 5, 3}), w);
             }),
             Catch::Contains("conv2d('flat', 'w')") && Catch::Contains("rank 4") &&
                 Catch::Contains("[7, 5, 3]"));
  CHECK_THAT(error([&] {
               vkt::conv2d(x, g.input("w3", {3, 3, 3}));
             }),
             Catch::Contains("filter") && Catch::Contains("[3, 3, 3]"));
  CHECK_THAT(error([&] {
               vkt::conv2d(x, g.input("w2", {3, 3, 2, 4}));
             }),
             Catch::Contains("channel mismatch") && Catch::Contains("[2, 7, 5, 3]") &&
                 Catch::Contains("[3, 3, 2, 4]"));
  CHECK_THAT(error([&] {
               vkt::conv2d(x, g.input("wg", {3, 3, 1, 4}), {.groups = 2});
             }),
             Catch::Contains("groups = 2 does not divide the 3 channels"));
  CHECK_THAT(error([&] {
               vkt::conv2d(x, g.input("wo", {3, 3, 1, 4}), {.groups = 3});
             }),
             Catch::Contains("groups = 3 does not divide the 4 filters"));
  CHECK_THAT(error([&] { vkt::conv2d(x, w, {.groups = 0}); }), Catch::Contains("groups is 0"));
  CHECK_THAT(error([&] {
               vkt::conv2d(g.input("ids", {2, 7, 5, 3}, vkt::DType::I32), w);
             }),
             Catch::Contains("'ids' holds i32"));
  vkt::Graph other(vkt::test::shared_device());
  CHECK_THAT(error([&] {
               vkt::conv2d(x, other.input("w", {3, 3, 3, 4}));
             }),
             Catch::Contains("different graphs"));
  // A 5-wide image under a 3-wide window dilated by 3 (span 7).
  CHECK_THAT(error([&] {
               vkt::conv2d(x, w, {.dilations = {1, 3}});
             }),
             Catch::Contains("column window spans 7") && Catch::Contains("pad the input"));
  CHECK_THAT(error([&] {
               vkt::conv2d(x, g.input("big", {9, 1, 3, 4}));
             }),
             Catch::Contains("row window spans 9"));
  CHECK_THAT(error([&] {
               vkt::conv2d(x, w, {.strides = {0, 1}});
             }),
             Catch::Contains("row stride is 0"));
  CHECK_THAT(error([&] {
               vkt::conv2d(x, w, {.padding = Padding::Explicit, .explicit_padding = {0, -1, 0, 0}});
             }),
             Catch::Contains("bottom padding is -1"));
  // Too many pixels for one dispatch: checked before anything is recorded.
  CHECK_THAT(error([&] {
               vkt::conv2d(g.input("huge", {64, 512, 512, 1}), g.input("k", {1, 1, 1, 1}));
             }),
             Catch::Contains("split the batch"));
  CHECK_THAT(error([&] {
               vkt::layers::conv2d(x, 4, {3, 3}, {.groups = 2});
             }),
             Catch::Contains("groups = 2 must divide"));
  // Second derivatives are refused with a clear message.
  const Tensor wv = g.variable("wv", {3, 3, 3, 4});
  const Tensor y = vkt::conv2d(x, wv);
  const std::vector<vkt::Gradient> first = vkt::gradients(vkt::reduce_sum(y * y), {wv});
  CHECK_THAT(error([&] { vkt::gradients(vkt::reduce_sum(first[0].dense), {wv}); }),
             Catch::Contains("second derivatives of conv2d"));
}
