// The tuning cache: round trips across Devices and runs, is shared by the
// process's Devices, ignores a malformed or foreign file with a log line; and
// default_cache_dir() finds the user's cache directory.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <vktower/runtime/vulkan/cache_dir.h>
#include <vktower/runtime/vulkan/detail/log.h>
#include <vktower/runtime/vulkan/device.h>
#include <vktower/runtime/vulkan/instance.h>
#include <vktower/runtime/vulkan/tuning_cache.h>
#include "env_scope.h"
#include "log_capture.h"
#include "test_support.h"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using Values = std::vector<std::uint32_t>;

namespace {

using vkt::test::EnvScope;
using vkt::test::LogCapture;

}  // namespace

TEST_CASE("the tuning cache round-trips across Devices and is shared while they live", "[cache]") {
  const vkt::test::TempDir dir;
  vkt::Instance instance;
  const vkt::DeviceOptions options{.cache_dir = dir.path};
  {
    vkt::Device a(instance, 0, options);
    CHECK_FALSE(a.tuning().find("matmul/64x64x64").has_value());
    a.tuning().store("matmul/64x64x64", {64, 32, 8});
    a.tuning().store("matmul/1x1x1", {});
    vkt::Device b(instance, 0, options);  // a second tower: the same cache
    CHECK(&b.tuning() == &a.tuning());
    CHECK(b.tuning().find("matmul/64x64x64") == Values{64, 32, 8});
    b.tuning().store("matmul/64x64x64", {128, 16, 4});  // replaces
  }
  const fs::path file = vkt::test::only_file_starting(dir.path, "tuning-");
  {
    vkt::Device c(instance, 0, options);  // a later run: from the file
    CHECK(c.tuning().find("matmul/64x64x64") == Values{128, 16, 4});
    CHECK(c.tuning().find("matmul/1x1x1") == Values{});
    CHECK_FALSE(c.tuning().find("matmul/2x2x2").has_value());
    CHECK(c.tuning().file() == file);
  }
  // Without a cache directory: in memory only, nothing written or read.
  vkt::Device d(instance, 0, vkt::DeviceOptions{});
  CHECK(d.tuning().file().empty());
  CHECK_FALSE(d.tuning().find("matmul/64x64x64").has_value());
  d.tuning().store("x", {1});
  CHECK(d.tuning().find("x") == Values{1});
  CHECK(vkt::test::error_of([&] { d.tuning().store("", {1}); }) ==
        "TuningCache::store: the key is empty; name what was tuned");
}

TEST_CASE("a malformed or foreign tuning file is ignored with a log line, then rewritten",
          "[cache]") {
  const vkt::test::TempDir dir;
  vkt::Instance instance;
  const vkt::DeviceOptions options{.cache_dir = dir.path};
  {
    vkt::Device a(instance, 0, options);
    a.tuning().store("k", {1, 2, 3});
  }
  const fs::path file = vkt::test::only_file_starting(dir.path, "tuning-");
  std::string good;
  {
    std::ifstream in(file);
    good.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const std::string stem = file.stem().string().substr(std::string("tuning-").size());
  const auto doc = [&](const std::string& device, const std::string& entries) {
    return R"({"format": "vktower-tuning-1", "device": ")" + device + R"(", "entries": )" +
           entries + "}";
  };
  struct Bad {
    std::string text;
    const char* logged;
  };
  const Bad bad = GENERATE_COPY(
      Bad{"{not json", "not JSON"}, Bad{"[1, 2]", "not a JSON object"},
      Bad{R"({"format": "other", "device": "x", "entries": {}})", "\"format\""},
      Bad{doc("some-other-gpu", R"({"k": [1]})"), "belongs to device 'some-other-gpu'"},
      Bad{doc(stem, R"([1, 2])"), "\"entries\" is not an object"},
      Bad{doc(stem, R"({"k": 3})"), "entry 'k' is not an array"},
      Bad{doc(stem, R"({"k": [-1]})"), "entry 'k' holds -1"},
      Bad{doc(stem, R"({"k": [4294967296]})"), "entry 'k' holds 4294967296"},
      Bad{doc(stem, R"({"k": ["8"]})"), "entry 'k' holds \"8\""},
      Bad{doc(stem, R"({"k": [1.5]})"), "entry 'k' holds 1.5"},
      Bad{std::string(vkt::TuningCache::kMaxFileBytes + 1, ' '), "more than a tuning file holds"});
  INFO(bad.text.substr(0, 80));
  vkt::test::write_file(file, bad.text);
  {
    const LogCapture log;
    vkt::Device b(instance, 0, options);
    CHECK_FALSE(b.tuning().find("k").has_value());
    const std::vector<std::string> lines = log.lines();
    REQUIRE(lines.size() == 1);
    CHECK_THAT(lines[0], Contains("ignoring the tuning cache") && Contains(bad.logged));
    b.tuning().store("k2", {7});
    b.tuning().save();
  }
  // Rewritten valid (the bad entries are gone, the new one is there), quietly.
  const LogCapture log;
  vkt::Device c(instance, 0, options);
  CHECK(c.tuning().find("k2") == Values{7});
  CHECK_FALSE(c.tuning().find("k").has_value());
  CHECK(log.lines().empty());
}

TEST_CASE("default_cache_dir: VKT_CACHE_DIR, then XDG_CACHE_HOME, then HOME, made private",
          "[cache]") {
  const vkt::test::TempDir dir;
  const EnvScope xdg("XDG_CACHE_HOME", (dir.path / "xdg").c_str());
  const EnvScope home("HOME", (dir.path / "home").c_str());
  {
    const EnvScope cache("VKT_CACHE_DIR", nullptr);
    CHECK(vkt::default_cache_dir() == dir.path / "xdg" / "vktower");
    struct stat st {};
    REQUIRE(::stat((dir.path / "xdg" / "vktower").c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
    {
      const EnvScope relative("XDG_CACHE_HOME", "relative/cache");  // XDG: not used
      CHECK(vkt::default_cache_dir() == dir.path / "home" / ".cache" / "vktower");
      CHECK(fs::is_directory(dir.path / "home" / ".cache" / "vktower"));
    }
    {
      const EnvScope no_xdg("XDG_CACHE_HOME", nullptr);
      const EnvScope no_home("HOME", nullptr);
      const LogCapture log;
      CHECK_FALSE(vkt::default_cache_dir().has_value());
      REQUIRE(log.lines().size() == 1);
      CHECK_THAT(log.lines()[0], Contains("no disk cache") && Contains("VKT_CACHE_DIR"));
    }
    {
      // Where the directory cannot be made: no cache, a log line, no error.
      vkt::test::write_file(dir.path / "file", "x");
      const EnvScope blocked("XDG_CACHE_HOME", (dir.path / "file").c_str());
      const LogCapture log;
      CHECK_FALSE(vkt::default_cache_dir().has_value());
      REQUIRE(log.lines().size() == 1);
      CHECK_THAT(log.lines()[0], Contains("cannot use"));
    }
  }
  {
    const EnvScope cache("VKT_CACHE_DIR", (dir.path / "explicit").c_str());
    CHECK(vkt::default_cache_dir() == dir.path / "explicit");
  }
  for (const char* off : {"off", "", "0"}) {
    const EnvScope cache("VKT_CACHE_DIR", off);
    CHECK_FALSE(vkt::default_cache_dir().has_value());
  }
  {
    const EnvScope cache("VKT_CACHE_DIR", "not/absolute");
    const LogCapture log;
    CHECK_FALSE(vkt::default_cache_dir().has_value());
    REQUIRE(log.lines().size() == 1);
    CHECK_THAT(log.lines()[0], Contains("not an absolute path"));
  }
}
