#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>

#include <vktower/runtime/vulkan/buffer.h>
#include <vktower/runtime/vulkan/device.h>
#include <vktower/runtime/vulkan/instance.h>
#include <vktower/runtime/vulkan/kernel.h>
#include <vktower/runtime/vulkan/shader_registry.h>
#include <vktower/runtime/vulkan/stream.h>
#include "test_support.h"

using Catch::Matchers::Contains;

namespace {

struct SaxpyParams {
  float a;
  std::uint32_t n;
};

}  // namespace

TEST_CASE("saxpy on the device matches the CPU element by element") {
  vkt::Instance instance;
  vkt::Device device(instance, 0);
  const std::uint32_t n = 100003;  // not a multiple of the workgroup size
  const std::uint32_t tail = 37;   // elements past n must stay untouched
  const float a = 2.5f;
  const std::vector<float> x = vkt::test::random_floats(n + tail, 1);
  const std::vector<float> y = vkt::test::random_floats(n + tail, 2);

  vkt::Buffer bx(device, x.size() * sizeof(float));
  vkt::Buffer by(device, y.size() * sizeof(float));
  bx.upload(x);
  by.upload(y);
  const vkt::Kernel& saxpy = device.kernel({.shader = "saxpy", .local_size = {128, 1, 1}});
  CHECK(saxpy.local_size() == std::array<std::uint32_t, 3>{128, 1, 1});
  CHECK(saxpy.bindings().size() == 2);
  CHECK(saxpy.bindings()[0].read_only);
  CHECK_FALSE(saxpy.bindings()[1].read_only);
  CHECK(saxpy.push_constant_bytes() == sizeof(SaxpyParams));

  vkt::Stream stream(device);
  const vkt::Groups groups = vkt::Stream::groups_for(saxpy, n);
  CHECK(groups == vkt::Groups{(n + 127) / 128, 1, 1});
  stream.dispatch(saxpy, {bx, by}, SaxpyParams{a, n}, groups);
  stream.run();

  const std::vector<float> out = by.download<float>();
  std::size_t wrong = 0;
  for (std::uint32_t i = 0; i < n; ++i) {
    // A few ulps of the operands' magnitude: float a*x and the sum round once each.
    const double expected = static_cast<double>(a) * x[i] + y[i];
    const double scale = std::abs(static_cast<double>(a) * x[i]) + std::abs(y[i]);
    if (!(std::abs(out[i] - expected) <= 2 * FLT_EPSILON * scale)) ++wrong;
  }
  CHECK(wrong == 0);
  for (std::uint32_t i = n; i < n + tail; ++i) CHECK(out[i] == y[i]);
}

TEST_CASE("specialization constants change what a kernel computes") {
  vkt::Instance instance;
  vkt::Device device(instance, 0);
  const std::uint32_t n = 1000;
  const std::vector<float> x = vkt::test::random_floats(n, 3);
  vkt::Buffer in(device, n * sizeof(float));
  vkt::Buffer out(device, n * sizeof(float));
  in.upload(x);

  auto run = [&](const vkt::Kernel& kernel) {
    vkt::Stream stream(device);
    stream.dispatch(kernel, {in, out}, n, vkt::Stream::groups_for(kernel, n));
    stream.run();
    return out.download<float>();
  };
  const vkt::Kernel& plain = device.kernel({.shader = "scale_spec"});
  const vkt::Kernel& scaled = device.kernel(
      {.shader = "scale_spec",
       .local_size = {64, 1, 1},
       .constants = {vkt::SpecConstant::f32(1, 3.0f), vkt::SpecConstant::f32(2, -1.0f)}});
  CHECK(&plain != &scaled);
  // The cache hands back the same pipeline for the same description.
  CHECK(&device.kernel({.shader = "scale_spec",
                        .local_size = {64, 1, 1},
                        .constants = {vkt::SpecConstant::f32(2, -1.0f),
                                      vkt::SpecConstant::f32(1, 3.0f)}}) == &scaled);

  const std::vector<float> identity = run(plain);
  const std::vector<float> affine = run(scaled);
  for (std::uint32_t i = 0; i < n; ++i) {
    CHECK(identity[i] == x[i]);
    CHECK(affine[i] == Approx(3.0f * x[i] - 1.0f).margin(1e-6));
  }
}

TEST_CASE("every embedded shader is listed and reflects") {
  bool saw_saxpy = false;
  for (const auto& [name, words] : vkt::shaders::all()) {
    CHECK(words.size() > 5);
    CHECK(words[0] == 0x07230203u);  // SPIR-V magic
    saw_saxpy = saw_saxpy || name == "saxpy";
  }
  CHECK(saw_saxpy);
}

TEST_CASE("kernel and dispatch misuse is a vkt::Error naming the problem") {
  vkt::Instance instance;
  vkt::Device device(instance, 0);
  vkt::Buffer x(device, 64 * sizeof(float));
  vkt::Buffer y(device, 64 * sizeof(float));

  const std::string unknown = vkt::test::error_of([&] { device.kernel({.shader = "saxpyy"}); });
  CHECK_THAT(unknown, Contains("no shader named 'saxpyy'"));
  CHECK_THAT(unknown, Contains("saxpy"));

  CHECK_THAT(vkt::test::error_of([&] {
               device.kernel({.shader = "saxpy", .constants = {vkt::SpecConstant::u32(7, 1)}});
             }),
             Contains("has no specialization constant 7"));
  CHECK_THAT(vkt::test::error_of([&] {
               device.kernel({.shader = "saxpy", .local_size = {1u << 20, 1, 1}});
             }),
             Contains("larger than device"));

  const vkt::Kernel& saxpy = device.kernel({.shader = "saxpy", .local_size = {64, 1, 1}});
  vkt::Stream stream(device);
  CHECK_THAT(vkt::test::error_of([&] {
               stream.dispatch(saxpy, {x}, SaxpyParams{1.0f, 64}, vkt::Groups{1, 1, 1});
             }),
             Contains("takes 2 buffers (X, Y) but 1 were given"));
  CHECK_THAT(vkt::test::error_of([&] {
               stream.dispatch(saxpy, {x, y}, std::uint32_t{64}, vkt::Groups{1, 1, 1});
             }),
             Contains("push constants are 8 bytes but 4 were given"));

  vkt::Buffer staging(device, 64 * sizeof(float), vkt::BufferKind::Staging);
  CHECK_THAT(vkt::test::error_of([&] {
               stream.dispatch(saxpy, {x, staging}, SaxpyParams{1.0f, 64}, vkt::Groups{1, 1, 1});
             }),
             Contains("staging buffer cannot be bound"));

  vkt::Device other(instance, 0);
  vkt::Buffer foreign(other, 64 * sizeof(float));
  CHECK_THAT(vkt::test::error_of([&] {
               stream.dispatch(saxpy, {x, foreign}, SaxpyParams{1.0f, 64}, vkt::Groups{1, 1, 1});
             }),
             Contains("belongs to another Device"));
  CHECK_THAT(vkt::test::error_of([&] {
               vkt::Stream s(other);
               s.dispatch(saxpy, {foreign, foreign}, SaxpyParams{1.0f, 64}, vkt::Groups{1, 1, 1});
             }),
             Contains("built for another Device"));
  CHECK(stream.command_count() == 0);  // nothing was recorded by the failed calls
}

TEST_CASE("texel-buffer bindings read a storage buffer as RGBA32F texels") {
  vkt::Instance instance;
  vkt::Device device(instance, 0);
  const std::uint32_t texels = 1001;
  const std::vector<float> values = vkt::test::random_floats(texels * 4 + 8, 21);
  vkt::Buffer src(device, values.size() * sizeof(float));
  vkt::Buffer dst(device, texels * 16);
  src.upload(values);
  const vkt::Kernel& read = device.kernel({.shader = "texel_read", .local_size = {64, 1, 1}});
  CHECK(read.bindings()[0].kind == vkt::detail::BindingKind::UniformTexelBuffer);
  CHECK(read.bindings()[0].read_only);
  vkt::Stream stream(device);
  // A window starting at texel 2 (byte 32): offsets are honoured.
  const std::size_t offset = 32;
  REQUIRE(offset % device.limits().minTexelBufferOffsetAlignment == 0);
  stream.dispatch(read, {vkt::BufferRange(src, offset, texels * 16), dst}, texels,
                  vkt::Stream::groups_for(read, texels));
  stream.run();
  const std::vector<float> out = dst.download<float>();
  for (std::size_t i = 0; i < out.size(); ++i) REQUIRE(out[i] == values[i + 8]);

  vkt::Stream fresh(device);
  CHECK_THAT(
      vkt::test::error_of([&] {
        fresh.dispatch(read, {vkt::BufferRange(src, 0, 20), dst}, texels, vkt::Groups{1, 1, 1});
      }),
      Contains("multiple of 16 bytes"));
}
