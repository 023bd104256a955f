// The checkpoint index of a model directory: anything but the list the manager
// writes is refused naming the file, and never names a file outside the directory.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include <vktower/runtime/io/checkpoint_manager.h>

#include "../test_support.h"

using Catch::Matchers::Contains;
using vkt::test::TempDir;

TEST_CASE("a checkpoint index naming anything but checkpoints of its directory is refused") {
  TempDir dir;
  const std::string index = dir / "checkpoint";
  vkt::CheckpointManager manager(dir.path.string(), 2);
  const auto refused = [&](const std::string& text) {
    std::ofstream(index, std::ios::trunc) << text;
    const std::string message = vkt::test::error_of([&] { (void)manager.latest(); });
    CHECK_THAT(message, Contains("checkpoint index '" + index + "' is corrupt"));
    return message;
  };
  std::ofstream(index) << R"({"latest": "ckpt-7.safetensors", "all": ["ckpt-3.safetensors",
                             "ckpt-7.safetensors"]})";
  CHECK(manager.latest() == dir / "ckpt-7.safetensors");

  // The manager deletes the oldest names beyond keep_max: a path here would
  // make it delete a file anywhere.
  std::ofstream(dir / "victim") << "keep me";
  CHECK_THAT(refused(R"({"latest":"../victim","all":["../victim"]})"),
             Contains(R"("../victim" is not a file name ckpt-<step>.safetensors)"));
  refused(R"({"latest":"/etc/passwd","all":["/etc/passwd"]})");
  refused(R"({"latest":"ckpt-01.safetensors","all":["ckpt-01.safetensors"]})");
  refused(R"({"latest":"ckpt-1.safetensors","all":["ckpt-1.safetensors\u0000x"]})");
  CHECK_THAT(refused(R"({"latest":"ckpt-1.safetensors","all":["ckpt-1.safetensors",
                      "ckpt-1.safetensors"]})"),
             Contains("listed twice"));
  CHECK_THAT(refused(R"({"latest":"ckpt-1.safetensors","all":["ckpt-1.safetensors",
                      "ckpt-2.safetensors"]})"),
             Contains("\"latest\" is not the last of \"all\""));
  refused(R"({"latest":"ckpt-1.safetensors","all":[]})");
  refused(R"({"latest":"ckpt-1.safetensors","all":[1]})");
  refused(R"(["ckpt-1.safetensors"])");
  refused("");
  refused("{\"latest\":\"ckpt-1.safetensors\",\"all\":[\"ckpt-1.safetensors\"]}\xff");
  CHECK(std::filesystem::exists(dir / "victim"));
}
