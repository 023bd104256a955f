// The on-disk Vulkan pipeline cache: a warm start computes what a cold one
// does, and a damaged or foreign file is ignored with a log line, then rewritten.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <vktower/runtime/graph/executor.h>
#include <vktower/runtime/graph/graph.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/matmul.h>
#include <vktower/runtime/graph/ops/softmax.h>
#include <vktower/runtime/vulkan/detail/log.h>
#include <vktower/runtime/vulkan/device.h>
#include <vktower/runtime/vulkan/instance.h>
#include <vktower/runtime/vulkan/pipeline_cache.h>
#include "log_capture.h"
#include "test_support.h"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

// softmax(relu(a b)): a matmul, an elementwise and a reduction kernel.
std::vector<float> small_model(vkt::Device& device) {
  vkt::Graph g(device);
  const vkt::Tensor a = g.input("a", vkt::Shape{{13, 37}});
  const vkt::Tensor b = g.input("b", vkt::Shape{{37, 11}});
  const vkt::Tensor y = vkt::softmax(vkt::relu(vkt::matmul(a, b)));
  vkt::Executor exec(g, {y});
  exec.feed("a", vkt::test::random_floats(13 * 37, 5));
  exec.feed("b", vkt::test::random_floats(37 * 11, 6));
  exec.run();
  return exec.read(y);
}

struct Run {
  std::vector<float> values;
  std::size_t loaded_bytes = 0;
  std::vector<std::string> log;  // warnings and above while the Device lived
};

// One Device on `dir` from creation to destruction (which saves the cache).
Run run_with_cache(const fs::path& dir) {
  const vkt::test::LogCapture warnings(spdlog::level::warn);
  Run run;
  {
    vkt::Instance instance;
    vkt::Device device(instance, 0, vkt::DeviceOptions{.cache_dir = dir});
    run.loaded_bytes = device.pipeline_cache_loaded_bytes();
    run.values = small_model(device);
  }
  run.log = warnings.lines();
  return run;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// zlib's CRC-32, bit by bit: independent of the library's own.
std::uint32_t crc32_bitwise(std::span<const char> bytes) {
  std::uint32_t c = 0xffffffffu;
  for (const char b : bytes) {
    c ^= static_cast<std::uint8_t>(b);
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return ~c;
}

constexpr std::size_t kFileHeader = 24;  // "VKTPIPE1", data size, crc32, reserved

}  // namespace

TEST_CASE("a warm pipeline cache computes the same bits as a cold one", "[cache]") {
  const vkt::test::TempDir dir;
  const Run cold = run_with_cache(dir.path);
  CHECK(cold.loaded_bytes == 0);
  CHECK(cold.log.empty());
  const fs::path file = vkt::test::only_file_starting(dir.path, "pipelines-");
  CHECK(fs::file_size(file) > kFileHeader);

  const Run warm = run_with_cache(dir.path);
  CHECK(warm.loaded_bytes == fs::file_size(file) - kFileHeader);
  CHECK(warm.log.empty());
  CHECK(same_bits(warm.values, cold.values));

  // A Device without a cache directory agrees too, and writes nothing.
  vkt::Instance instance;
  vkt::Device device(instance, 0, vkt::DeviceOptions{});
  CHECK(device.pipeline_cache_loaded_bytes() == 0);
  CHECK(same_bits(small_model(device), cold.values));
}

TEST_CASE("a damaged or foreign pipeline cache file is ignored with a log line, then rewritten",
          "[cache]") {
  const vkt::test::TempDir dir;
  const Run cold = run_with_cache(dir.path);
  const fs::path file = vkt::test::only_file_starting(dir.path, "pipelines-");
  const std::vector<char> good = vkt::test::read_file<std::vector<char>>(file);
  REQUIRE(good.size() >= kFileHeader + 32);  // lavapipe's data: Vulkan's header alone

  struct Damage {
    const char* name;
    const char* logged;
  };
  const Damage damage = GENERATE(
      Damage{"corrupt body", "checksum does not match"}, Damage{"truncated", "truncated"},
      Damage{"not ours", "not a vktower pipeline cache file"},
      Damage{"foreign UUID", "pipeline cache UUID"}, Damage{"foreign device", "made for vendor"},
      Damage{"oversized", "more than the"}, Damage{"empty", "too short"});
  INFO(damage.name);
  std::vector<char> bad = good;
  const std::string name = damage.name;
  if (name == "corrupt body") {
    bad.back() ^= 0x5a;
  } else if (name == "truncated") {
    bad.resize(good.size() / 2);
  } else if (name == "not ours") {
    std::memcpy(bad.data(), "GARBAGE!", 8);
  } else if (name == "foreign UUID" || name == "foreign device") {
    // A well-formed file of another driver: our header and checksum valid.
    const std::size_t field = name == "foreign UUID" ? 16 : 12;  // offset in Vulkan's header
    bad[kFileHeader + field] ^= 0x01;
    const std::uint32_t crc = crc32_bitwise(std::span(bad).subspan(kFileHeader));
    std::memcpy(bad.data() + 16, &crc, sizeof(crc));
  } else if (name == "empty") {
    bad.clear();
  }
  if (name == "oversized") {
    fs::resize_file(file, vkt::PipelineCache::kMaxFileBytes + 1);  // sparse: no real bytes
  } else {
    vkt::test::write_file(file, bad);
  }

  const Run after = run_with_cache(dir.path);
  CHECK(after.loaded_bytes == 0);
  REQUIRE(after.log.size() == 1);
  CHECK_THAT(after.log[0], Contains("ignoring the pipeline cache") && Contains(damage.logged));
  CHECK(same_bits(after.values, cold.values));
  // Rewritten valid: the next Device starts warm, quietly.
  const Run again = run_with_cache(dir.path);
  CHECK(again.loaded_bytes > 0);
  CHECK(again.log.empty());
  CHECK(same_bits(again.values, cold.values));
}

TEST_CASE("pipeline_cache_rejection checks the Vulkan header against the device", "[cache]") {
  vkt::DeviceCacheKey key{.vendor_id = 0x10de, .device_id = 0x2330, .driver_version = 7};
  for (std::size_t i = 0; i < 16; ++i) key.pipeline_cache_uuid[i] = static_cast<std::uint8_t>(i);
  std::vector<std::byte> data(48);
  const auto put = [&](std::size_t at, std::uint32_t v) { std::memcpy(data.data() + at, &v, 4); };
  put(0, 32);  // headerSize
  put(4, 1);   // VK_PIPELINE_CACHE_HEADER_VERSION_ONE
  put(8, 0x10de);
  put(12, 0x2330);
  std::memcpy(data.data() + 16, key.pipeline_cache_uuid.data(), 16);
  CHECK(vkt::pipeline_cache_rejection(data, key).empty());

  CHECK_THAT(vkt::pipeline_cache_rejection(std::span(data).first(31), key), Contains("shorter"));
  put(4, 2);
  CHECK_THAT(vkt::pipeline_cache_rejection(data, key), Contains("header version 2"));
  put(4, 1);
  put(0, 49);
  CHECK_THAT(vkt::pipeline_cache_rejection(data, key), Contains("header size of 49"));
  put(0, 31);
  CHECK_THAT(vkt::pipeline_cache_rejection(data, key), Contains("header size of 31"));
  put(0, 32);
  put(8, 0x1002);
  CHECK_THAT(vkt::pipeline_cache_rejection(data, key), Contains("vendor 1002"));
  put(8, 0x10de);
  data[31] ^= std::byte{1};
  CHECK_THAT(vkt::pipeline_cache_rejection(data, key), Contains("UUID"));
}
