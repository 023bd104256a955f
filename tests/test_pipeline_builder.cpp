#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include <vktower/runtime/vulkan/buffer.h>
#include <vktower/runtime/vulkan/device.h>
#include <vktower/runtime/vulkan/instance.h>
#include <vktower/runtime/vulkan/kernel.h>
#include <vktower/runtime/vulkan/pipeline_builder.h>
#include <vktower/runtime/vulkan/stream.h>
#include "test_support.h"

TEST_CASE("the pipeline builder runs builds off the caller's thread, each once, errors kept") {
  std::atomic<int> ran{0};
  std::mutex ids_mutex;
  std::set<std::thread::id> ids;
  std::vector<std::shared_future<void>> done;
  {
    vkt::PipelineBuilder builder;
    for (int i = 0; i < 40; ++i) {
      done.push_back(builder.start([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        std::lock_guard lock(ids_mutex);
        ids.insert(std::this_thread::get_id());
        ++ran;
      }));
    }
    const std::shared_future<void> failed =
        builder.start([] { throw std::runtime_error("no pipeline today"); });
    CHECK_THROWS_WITH(failed.get(), "no pipeline today");
    CHECK_THROWS_WITH(failed.get(), "no pipeline today");  // as often as it is asked
  }                                                        // the destructor finishes what is queued
  CHECK(ran == 40);
  for (const auto& d : done)
    CHECK(d.wait_for(std::chrono::seconds(0)) == std::future_status::ready);
  CHECK(ids.count(std::this_thread::get_id()) == 0);
  CHECK(ids.size() >= 1);
  CHECK(ids.size() <= vkt::PipelineBuilder::kMaxThreads);
}

TEST_CASE("the pipeline builder starts the largest waiting build first") {
  std::mutex mutex;
  std::vector<std::size_t> order;
  std::promise<void> gate;
  std::shared_future<void> open = gate.get_future().share();
  {
    vkt::PipelineBuilder builder(1);
    builder.start([open] { open.wait(); });  // holds the one thread while the rest queue
    for (std::size_t size : {100, 50000, 7, 50000, 3000}) {
      builder.start(
          [&, size] {
            std::lock_guard lock(mutex);
            order.push_back(size);
          },
          size);
    }
    gate.set_value();
  }
  CHECK(order == std::vector<std::size_t>{50000, 50000, 3000, 100, 7});
}

TEST_CASE("a stream of kernels still building records, runs them in order and waits for each") {
  vkt::Instance instance;
  vkt::Device device(instance, 0);
  const std::uint32_t n = 777;
  const std::vector<float> x = vkt::test::random_floats(n, 11);
  vkt::Buffer a(device, n * sizeof(float)), b(device, n * sizeof(float));
  a.upload(x);
  // Twelve distinct pipelines, asked for and dispatched before any is awaited:
  // y = 2 y + k for k = 1 .. 12, ping-ponging between the buffers.
  const std::uint64_t pipelines_before = device.object_counts().pipelines;
  vkt::Stream stream(device);
  for (int k = 1; k <= 12; ++k) {
    const vkt::Kernel& affine =
        device.kernel({.shader = "scale_spec",
                       .constants = {vkt::SpecConstant::f32(1, 2.0f),
                                     vkt::SpecConstant::f32(2, static_cast<float>(k))}});
    vkt::Buffer& from = k % 2 == 1 ? a : b;
    vkt::Buffer& to = k % 2 == 1 ? b : a;
    stream.dispatch(affine, {from, to}, n, vkt::Stream::groups_for(affine, n));
  }
  CHECK(device.object_counts().pipelines == pipelines_before + 12);
  stream.run();
  const std::vector<float> out = a.download<float>();  // k = 12 wrote a
  for (std::uint32_t i = 0; i < n; ++i) {
    double expected = x[i];
    for (int k = 1; k <= 12; ++k) expected = 2.0 * expected + k;
    // Every step doubles exactly; only the added integers round.
    CHECK(out[i] == Approx(expected).epsilon(1e-6));
  }
}
