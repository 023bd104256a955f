// Devices whose maxStorageBufferRange is small: the optimizers and the global
// norm bind their arenas as windows of at most that range, split over several
// dispatches, and train to the same bits as one dispatch over whole arenas;
// the sparse links take a compact table; ranges and tensors past the limit
// are clear errors.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <memory>
#include <random>

#include <vktower/optimizers/adam.h>
#include <vktower/optimizers/apply_op.h>
#include <vktower/optimizers/apply_window.h>
#include <vktower/optimizers/rmsprop.h>
#include <vktower/optimizers/sgd.h>
#include <vktower/optimizers/sparse_row_links.h>
#include <vktower/runtime/graph/executor.h>
#include <vktower/runtime/graph/graph.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/embedding.h>
#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/runtime/graph/ops/reduce.h>
#include <vktower/runtime/vulkan/kernel.h>
#include <vktower/runtime/vulkan/stream.h>

#include "../graph/row_kernels_scope.h"
#include "../shared_device.h"
#include "../test_support.h"
#include "sparse_links_reference.h"

using Catch::Matchers::Contains;
using vkt::Tensor;

namespace {

constexpr std::uint64_t kSmallRange = 1024;  // the least DeviceOptions allows

/// A Device on the shared instance whose storage-buffer range is 1 KiB (made per
/// test: it must go before the instance does).
std::unique_ptr<vkt::Device> limited_device() {
  vkt::test::shared_device();  // makes the shared instance
  vkt::DeviceOptions options = vkt::DeviceOptions::from_environment();
  options.max_storage_buffer_range = kSmallRange;
  return std::make_unique<vkt::Device>(*vkt::test::shared_slot().instance, 0, options);
}

struct Trained {
  std::vector<std::vector<float>> values;  // every variable and slot, after the last step
  std::vector<float> losses;
  std::size_t dispatches = 0;
};

using MakeOptimizer = std::function<std::unique_ptr<vkt::Optimizer>()>;

/// A two-layer MLP on [8, 10] inputs plus two embedding tables (rows of 8
/// floats, the vec4 path, and of 6, the float path) trained by one optimizer
/// call. With a 1 KiB limit: the first table (1280 bytes) is gathered and
/// updated in windows of rows; the variable arena (about 3.5 KiB, more with
/// slots) and the gradient arena (about 1.5 KiB) are bound in windows; every
/// other tensor fits.
Trained train(vkt::Device& device, const MakeOptimizer& make, int steps) {
  vkt::Graph g(device, {.seed = 5});
  const Tensor x = g.input("x", {8, 10});
  const Tensor labels = g.input("labels", {8}, vkt::DType::I32);
  const Tensor h = vkt::layers::dense(x, 20, vkt::layers::Activation::Relu, "hidden");
  const Tensor logits = vkt::layers::dense(h, 3, vkt::layers::Activation::None, "out");
  Tensor loss = vkt::sparse_softmax_cross_entropy(labels, logits);
  const std::pair<std::int64_t, std::int64_t> tables[] = {{40, 8}, {40, 6}};
  for (std::size_t t = 0; t < 2; ++t) {
    const auto [rows, width] = tables[t];
    const Tensor table =
        g.variable("table" + std::to_string(t), {rows, width}, vkt::Initializer::uniform(-1, 1));
    const Tensor ids = g.input("ids" + std::to_string(t), {6}, vkt::DType::I32);
    const Tensor dy = g.input("dy" + std::to_string(t), {6, width});
    loss = loss + vkt::reduce_sum(vkt::embedding_lookup(table, ids) * dy);
  }
  std::unique_ptr<vkt::Optimizer> opt = make();
  const Tensor train_op = opt->minimize(loss);
  vkt::Executor exec(g, {loss, train_op});

  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const auto random = [&](std::size_t n) {
    std::vector<float> v(n);
    for (float& f : v) f = normal(rng);
    return v;
  };
  Trained out;
  for (int step = 0; step < steps; ++step) {
    exec.feed("x", random(80));
    std::vector<std::int32_t> ys(8);
    for (int b = 0; b < 8; ++b) ys[b] = (b * 5 + step) % 3;
    exec.feed("labels", ys);
    for (std::size_t t = 0; t < 2; ++t) {
      // Duplicates, rows far apart (windows split between them), ids out of range.
      const auto rows = static_cast<std::int32_t>(tables[t].first);
      exec.feed(
          "ids" + std::to_string(t),
          std::vector<std::int32_t>{step % rows, rows - 1, -1, step % rows, rows / 2, rows + 2});
      exec.feed("dy" + std::to_string(t), random(6 * static_cast<std::size_t>(tables[t].second)));
    }
    exec.run();
    out.losses.push_back(exec.read(loss)[0]);
  }
  for (const Tensor& v : g.trainable_variables()) out.values.push_back(g.values(v));
  for (const Tensor& v : opt->variables()) out.values.push_back(g.values(v));
  out.dispatches = exec.dispatch_count();
  return out;
}

void check_same_bits(const MakeOptimizer& make) {
  const Trained whole = train(vkt::test::shared_device(), make, 4);
  const Trained split = train(*limited_device(), make, 4);
  // The limit made the updates take more dispatches (windows) ...
  CHECK(split.dispatches >= whole.dispatches + 2);
  // ... and nothing else: every loss, weight and slot has the same bits.
  CHECK(split.losses == whole.losses);
  REQUIRE(split.values.size() == whole.values.size());
  for (std::size_t i = 0; i < whole.values.size(); ++i) {
    INFO("variable " << i);
    CHECK(split.values[i] == whole.values[i]);
  }
  // Training moved the weights (a no-op would compare equal too).
  CHECK(whole.losses.front() != whole.losses.back());
}

}  // namespace

TEST_CASE("a small max storage buffer range trains with SGD to the same bits") {
  check_same_bits(
      [] { return std::make_unique<vkt::SGD>(0.05f, vkt::SGDOptions{.momentum = 0.9f}); });
}

TEST_CASE("a small max storage buffer range trains with Adam to the same bits") {
  check_same_bits([] { return std::make_unique<vkt::Adam>(0.01f); });
}

TEST_CASE("a small max storage buffer range trains with clipping and 3 slots to the same bits") {
  // Clipping by global norm splits the norm's sum too; centred RMSprop with
  // momentum uses all three slot windows.
  check_same_bits([] {
    return std::make_unique<vkt::RMSprop>(
        0.01f,
        vkt::RMSpropOptions{.momentum = 0.5, .centered = true, .clipping = {.global_norm = 0.5f}});
  });
}

TEST_CASE(
    "DeviceOptions max_storage_buffer_range is the effective limit, clamped to the device's") {
  CHECK(limited_device()->max_storage_buffer_range() == kSmallRange);
  vkt::Device& device = vkt::test::shared_device();
  CHECK(device.max_storage_buffer_range() == device.limits().maxStorageBufferRange);
  CHECK(device.max_texel_buffer_range() ==
        std::uint64_t{device.limits().maxTexelBufferElements} * 16);
  vkt::DeviceOptions huge;
  huge.max_storage_buffer_range = std::uint64_t{1} << 40;
  vkt::Device clamped(*vkt::test::shared_slot().instance, 0, huge);
  CHECK(clamped.max_storage_buffer_range() == device.limits().maxStorageBufferRange);
  vkt::DeviceOptions tiny;
  tiny.max_storage_buffer_range = 512;
  CHECK_THAT(
      vkt::test::error_of([&] { vkt::Device d(*vkt::test::shared_slot().instance, 0, tiny); }),
      Contains("max_storage_buffer_range 512 is too small") && Contains("1024"));
}

TEST_CASE("a dispatch binding a range past the max storage buffer range names it") {
  const std::unique_ptr<vkt::Device> limited = limited_device();
  vkt::Device& device = *limited;
  const vkt::Kernel& saxpy = device.kernel({.shader = "saxpy", .local_size = {64, 1, 1}});
  vkt::Buffer x(device, 2048), y(device, 2048);
  vkt::Stream stream(device);
  struct {
    float a;
    std::uint32_t n;
  } push{2.0f, 256};
  // 1024 bytes are allowed, 1040 not.
  stream.dispatch(saxpy, {vkt::BufferRange(x, 0, 1024), vkt::BufferRange(y, 0, 1024)}, push,
                  vkt::Groups{4, 1, 1});
  const std::string message = vkt::test::error_of([&] {
    stream.dispatch(saxpy, {vkt::BufferRange(x, 0, 1024), vkt::BufferRange(y, 0, 1040)}, push,
                    vkt::Groups{4, 1, 1});
  });
  CHECK_THAT(message, Contains("'saxpy'") && Contains("buffer 1") && Contains("1040 bytes") &&
                          Contains("max storage buffer range of 1024 bytes"));
  stream.run();
}

TEST_CASE("a tensor past the max storage buffer range fails when the Executor is built") {
  const std::unique_ptr<vkt::Device> device = limited_device();
  vkt::Graph g(*device);
  const Tensor x = g.input("x", {8, 40});  // 1280 bytes
  const Tensor y = vkt::reduce_sum(x * 2.0f);
  CHECK_THAT(vkt::test::error_of([&] { vkt::Executor exec(g, {y}); }),
             Contains("tensor 'x' [8, 40] holds 1280 bytes") && Contains("binds whole") &&
                 Contains("max storage buffer range of 1024 bytes"));
}

TEST_CASE("plan_windows splits segments and units so that every window fits the limit") {
  using vkt::detail::WindowSegment;
  // Two bindings per segment: vec4 units (16 bytes each), and a fixed range.
  const std::vector<WindowSegment> segments = {
      {40, {{0, 16, 0}, {4096, 0, 100}}, "a"},     // 640 bytes
      {40, {{640, 16, 0}, {4224, 0, 100}}, "b"},   // 640 bytes: split after 24 units
      {100, {{1280, 16, 0}, {4352, 0, 100}}, "c"}  // 1600 bytes: split again
  };
  const auto parts = vkt::detail::plan_windows(segments, 1024, 64, "test");
  REQUIRE(parts.size() == 3);
  CHECK(parts[0].first_segment == 0);
  CHECK(parts[0].end_segment == 2);
  CHECK(parts[0].first_unit == 0);
  CHECK(parts[0].end_unit == 24);  // (1024 - 640) / 16
  CHECK(parts[0].windows[0].offset == 0);
  CHECK(parts[0].windows[0].bytes == 1024);
  CHECK(parts[0].windows[1].offset == 4096);
  CHECK(parts[0].windows[1].bytes == 240);  // 4224 + 100 rounded up to 16, from 4096
  // The rest of b starts at byte 640 + 384 = 1024; c's units follow to the limit.
  CHECK(parts[1].first_segment == 1);
  CHECK(parts[1].end_segment == 3);
  CHECK(parts[1].first_unit == 24);
  CHECK(parts[1].end_unit == 48);  // 1024 + 1024 = 2048 = 1280 + 48 * 16
  CHECK(parts[1].windows[0].offset == 1024);
  CHECK(parts[1].windows[0].bytes == 1024);
  CHECK(parts[2].first_segment == 2);
  CHECK(parts[2].end_segment == 3);
  CHECK(parts[2].first_unit == 48);
  CHECK(parts[2].end_unit == 100);
  CHECK(parts[2].windows[0].offset == 2048);
  CHECK(parts[2].windows[0].bytes == 832);
  for (const auto& part : parts) {
    for (const auto& w : part.windows) CHECK(w.bytes <= 1024);
  }

  // A window's start is aligned down: a unit at byte 1000 with 256-byte
  // alignment leaves 1024 - (1000 - 768) bytes for the units.
  const auto aligned = vkt::detail::plan_windows({{100, {{1000, 16, 0}}, "d"}}, 1024, 256, "test");
  REQUIRE(aligned.size() == 3);
  CHECK(aligned[0].end_unit == 49);  // 768 + 1024 = 1792 >= 1000 + 49 * 16
  CHECK(aligned[0].windows[0].offset == 768);
  CHECK(aligned[1].first_unit == 49);
  CHECK(aligned[1].windows[0].offset == 1536);  // 1784 aligned down
  CHECK(aligned[1].end_unit == 97);             // 1536 + 1024 >= 1784 + 48 * 16
  CHECK(aligned[2].end_unit == 100);

  // One unit wider than the limit: a clear error naming the tensor.
  CHECK_THAT(vkt::test::error_of([] {
               (void)vkt::detail::plan_windows({{2, {{0, 2048, 0}}, "wide"}}, 1024, 64, "apply_x");
             }),
             Contains("apply_x: 'wide' does not fit") && Contains("1024 bytes"));
  CHECK_THAT(vkt::test::error_of([] {
               (void)vkt::detail::plan_windows({{2, {{0, 16, 0}, {0, 0, 4000}}, "values"}}, 1024,
                                               64, "apply_x");
             }),
             Contains("'values' does not fit"));
}

namespace {

/// A variable of 400 floats (1600 bytes, past a 1 KiB limit) updated from a fed
/// gradient: nothing binds it whole, so the update splits it mid-variable (and
/// the global norm its gradient).
std::vector<std::vector<float>> train_wide(vkt::Device& device, const MakeOptimizer& make) {
  vkt::Graph g(device, {.seed = 2});
  const Tensor w = g.variable("w", {400}, vkt::Initializer::uniform(-1, 1));
  const Tensor b = g.variable("b", {7}, vkt::Initializer::uniform(-1, 1));
  const Tensor gw = g.input("gw", {400});
  const Tensor gb = g.input("gb", {7});
  std::unique_ptr<vkt::Optimizer> opt = make();
  // b first, so that w's gradient starts mid-window and splits at an element
  // that is not a multiple of 256 (global_norm's invocations).
  vkt::Executor exec(
      g,
      {opt->apply_gradients({{vkt::Gradient{.dense = gb}, b}, {vkt::Gradient{.dense = gw}, w}})});
  std::mt19937 rng(4);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int step = 0; step < 3; ++step) {
    std::vector<float> v(400);
    for (float& f : v) f = normal(rng);
    exec.feed("gw", v);
    v.resize(7);
    for (float& f : v) f = normal(rng);
    exec.feed("gb", v);
    exec.run();
  }
  std::vector<std::vector<float>> out{g.values(w), g.values(b)};
  for (const Tensor& s : opt->variables()) out.push_back(g.values(s));
  return out;
}

}  // namespace

TEST_CASE("a variable past a small max storage buffer range is updated in parts to the same bits") {
  const MakeOptimizer makers[] = {
      [] {
        return std::make_unique<vkt::Adam>(
            0.01f, vkt::AdamOptions{.amsgrad = true, .clipping = {.global_norm = 1.0f}});
      },
      [] { return std::make_unique<vkt::SGD>(0.1f, vkt::SGDOptions{.momentum = 0.9f}); }};
  for (const MakeOptimizer& make : makers) {
    const auto whole = train_wide(vkt::test::shared_device(), make);
    const auto split = train_wide(*limited_device(), make);
    REQUIRE(split.size() == whole.size());
    for (std::size_t i = 0; i < whole.size(); ++i) {
      INFO("variable " << i);
      CHECK(split[i] == whole[i]);
    }
  }
}

namespace {

/// The global norm of gradients of the given sizes (each fed, so known), as
/// the optimizers' clipping computes it, run twice; with `partials`, the
/// first run's whole output (the norm, then every chunk's sum of squares).
std::vector<float> norm_twice(vkt::Device& device, const std::vector<std::vector<float>>& grads,
                              bool partials = false) {
  vkt::Graph g(device);
  // Fed gradients, as train_wide's: a computed one would bind whole tensors
  // the small range refuses.
  std::vector<Tensor> dense;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    const auto n = static_cast<std::int64_t>(grads[i].size());
    dense.push_back(g.input(fmt::format("c{}", i), {n}));
  }
  const Tensor norm = vkt::detail::global_norm(dense);
  vkt::Executor exec(g, {norm});
  for (std::size_t i = 0; i < grads.size(); ++i) exec.feed(fmt::format("c{}", i), grads[i]);
  std::vector<float> out;
  for (int run = 0; run < 2; ++run) {
    exec.run();
    if (partials) return exec.read(norm);
    out.push_back(exec.read(norm)[0]);
  }
  return out;
}

}  // namespace

TEST_CASE(
    "the global norm over many workgroups: a double sum's value, the same bits run to run and "
    "split by a small range") {
  // Sizes around the 256-float chunks, one that spans many windows.
  const std::vector<std::size_t> sizes{1, 255, 257, 1000, 50000};
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<float>> grads;
  double squares = 0;
  for (const std::size_t n : sizes) {
    std::vector<float>& v = grads.emplace_back(n);
    for (float& x : v) {
      x = normal(rng);
      squares += double{x} * x;
    }
  }
  const std::vector<float> whole = norm_twice(vkt::test::shared_device(), grads);
  CHECK(whole[0] == Approx(std::sqrt(squares)).epsilon(1e-6));
  CHECK(whole[1] == whole[0]);
  const std::vector<float> split = norm_twice(*limited_device(), grads);
  CHECK(split[0] == whole[0]);
  CHECK(split[1] == whole[0]);
  // A chunk a workgroup (GPUs) and a chunk an invocation (CPU devices): one
  // tree, every chunk's sum the same bits.
  std::vector<std::vector<float>> outputs;
  for (const char* kernels : {"workgroup", "invocation"}) {
    const vkt::test::RowKernelsScope scope(kernels);
    outputs.push_back(norm_twice(vkt::test::shared_device(), grads, true));
  }
  REQUIRE(outputs[0].size() > 200);  // the norm and every chunk's partial
  CHECK(outputs[0] == outputs[1]);
  CHECK(outputs[0][0] == whole[0]);
}

TEST_CASE(
    "sparse links under a small max storage buffer range: the compact hash table gives the same "
    "links, and ids past the range are refused in one line") {
  const std::unique_ptr<vkt::Device> device = limited_device();
  // 24 ids: a table of 64 slots would take 1060 bytes, past the 1 KiB range;
  // the compact one (32 slots) takes 676.
  std::vector<std::int32_t> ids(24);
  for (std::size_t j = 0; j < ids.size(); ++j) ids[j] = static_cast<std::int32_t>((j * 7) % 5);
  ids[3] = 9;  // out of range
  vkt::Graph g(*device);
  const Tensor input = g.input("ids", {24}, vkt::DType::I32);
  const Tensor links = vkt::detail::sparse_row_links(input, 6);
  CHECK(links.shape().elements() == 3 * 24 + 3 * 32 + 1);
  vkt::Executor exec(g, {links});
  exec.feed("ids", ids);
  exec.run();
  std::vector<std::int32_t> got = exec.read_i32(links);
  got.resize(48);
  CHECK(got == vkt::test::links_on_host(ids, 6));

  vkt::Graph big(*device);
  const Tensor many = big.input("ids", {100}, vkt::DType::I32);
  CHECK_THAT(vkt::test::error_of([&] { vkt::detail::sparse_row_links(many, 6); }),
             Contains("a sparse gradient of 100 rows needs 2740 bytes") &&
                 Contains("max storage buffer range of 1024 bytes") &&
                 Contains("use a dense gradient"));
}
