// Hugging Face checkpoints: written and read back bit for bit (one file and
// shards), every kind of damaged file refused naming it, and files exchanged
// with Python (when an interpreter with torch is here).
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <vktower/models/safetensors_archive.h>
#include <vktower/models/safetensors_header.h>
#include <vktower/models/safetensors_writer.h>

#include "../test_support.h"
#include "../torch_support.h"

using Catch::Matchers::Contains;
using vkt::models::SafetensorsArchive;
using vkt::models::TensorToWrite;
using vkt::test::TempDir;

namespace {

// A safetensors file of `header` (JSON, unpadded) and `data`.
std::vector<char> raw_file(const std::string& header, const std::string& data) {
  const std::uint64_t n = header.size();
  std::string file(reinterpret_cast<const char*>(&n), 8);
  file += header + data;
  return {file.begin(), file.end()};
}

std::vector<TensorToWrite> mixed_tensors() {
  return {
      {.name = "b.f32", .shape = {2, 3}, .values = {1.5f, -2.0f, 0.0f, 1e-30f, 3e38f, -0.0f}},
      {.name = "a.f16",
       .shape = {4},
       .dtype = vkt::DType::F16,
       .values = {1.0f / 3.0f, 65504.0f, 1e-7f, -2.5f}},
      {.name = "c.bf16",
       .shape = {3},
       .dtype = vkt::DType::BF16,
       .half_bits = {0x3f80, 0xc0a0, 0x0001}},
      {.name = "d.scalar", .shape = {}, .values = {7.0f}},
  };
}

}  // namespace

TEST_CASE("f32, f16 and bf16 entries written as model.safetensors read back exactly") {
  TempDir dir;
  const auto tensors = mixed_tensors();
  CHECK(vkt::models::write_checkpoint(dir.path.string(), tensors) ==
        std::vector<std::string>{"model.safetensors"});
  const std::string file = dir / "model.safetensors";
  const auto bytes = vkt::test::read_file<std::vector<char>>(file);
  std::uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);
  CHECK(length % 8 == 0);  // data 8-byte aligned, as transformers writes it
  const std::string header(bytes.data() + 8, length);
  CHECK_THAT(header, Contains(R"("__metadata__":{"format":"pt"})"));
  CHECK(header.find("\"a.f16\"") < header.find("\"b.f32\""));  // sorted by name

  const SafetensorsArchive archive = SafetensorsArchive::open(dir.path.string());
  CHECK(archive.path() == file);
  REQUIRE(archive.entries().size() == 4);
  CHECK(archive.entries()[0].name == "a.f16");
  CHECK(archive.entry("b.f32").shape == std::vector<std::int64_t>{2, 3});
  CHECK(archive.entry("d.scalar").shape.empty());
  CHECK(vkt::test::float_bits(archive.read_floats("b.f32")) ==
        vkt::test::float_bits(tensors[0].values));
  CHECK(archive.read_floats("d.scalar") == std::vector<float>{7.0f});
  // f16: 1/3 rounds to 0x3555, 65504 is the largest finite, 1e-7 is subnormal.
  CHECK(archive.read_half_bits("a.f16") ==
        std::vector<std::uint16_t>{0x3555, 0x7bff, 0x0002, 0xc100});
  const std::vector<float> f16 = archive.read_floats("a.f16");
  CHECK(f16[0] == 0.333251953125f);
  CHECK(f16[1] == 65504.0f);
  CHECK(f16[2] == std::ldexp(2.0f, -24));
  CHECK(f16[3] == -2.5f);
  // bf16 words go through untouched, and widen exactly.
  CHECK(archive.read_half_bits("c.bf16") == tensors[2].half_bits);
  CHECK(vkt::test::float_bits(archive.read_floats("c.bf16")) ==
        vkt::test::float_bits({1.0f, -5.0f, std::bit_cast<float>(0x00010000u)}));
  CHECK_THAT(vkt::test::error_of([&] { (void)archive.read_half_bits("b.f32"); }),
             Contains("entry \"b.f32\" has dtype F32"));
  archive.check_shape("b.f32", std::vector<std::int64_t>{2, 3});
  CHECK(vkt::test::error_of([&] {
          archive.check_shape("b.f32", std::vector<std::int64_t>{3, 2}, "config '/m/config.json'");
        }) == "safetensors file '" + file +
                  "': entry \"b.f32\" has shape [2, 3] but config "
                  "'/m/config.json' gives [3, 2] (a checkpoint of another model size?)");
  CHECK(vkt::test::error_of([&] { (void)archive.entry("lm_head.weight"); }) ==
        "checkpoint '" + file +
            "' has no entry \"lm_head.weight\" (is it a checkpoint of this "
            "architecture, with Hugging Face names?)");
}

TEST_CASE("a checkpoint past the shard size is written as shards and an index, and read back") {
  TempDir dir;
  std::vector<TensorToWrite> tensors;
  for (int i = 0; i < 5; ++i) {
    tensors.push_back({.name = "layer." + std::to_string(i) + ".weight",
                       .shape = {4, 8},
                       .dtype = i % 2 == 0 ? vkt::DType::BF16 : vkt::DType::F32,
                       .values = vkt::test::random_floats(32, 40 + i)});
  }
  // 64-byte bf16 and 128-byte f32 tensors; 200 bytes a shard: [0,1], [2,3], [4].
  const auto written =
      vkt::models::write_checkpoint(dir.path.string(), tensors, {.max_shard_bytes = 200});
  CHECK(written == std::vector<std::string>{
                       "model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                       "model-00003-of-00003.safetensors", "model.safetensors.index.json"});
  const std::string index = vkt::test::read_file(dir.path / "model.safetensors.index.json");
  CHECK_THAT(index, Contains(R"("total_size": 448)"));
  CHECK_THAT(index, Contains(R"("layer.4.weight": "model-00003-of-00003.safetensors")"));

  const SafetensorsArchive archive = SafetensorsArchive::open(dir.path.string());
  REQUIRE(archive.entries().size() == 5);
  CHECK(archive.entry("layer.2.weight").file == dir / "model-00002-of-00003.safetensors");
  for (const TensorToWrite& t : tensors) {
    const std::vector<float> expected =
        t.dtype == vkt::DType::F32 ? t.values : vkt::test::rounded_to_half(t.values, t.dtype);
    CHECK(vkt::test::float_bits(archive.read_floats(t.name)) == vkt::test::float_bits(expected));
  }
  // Written again as one file, the stale index goes: loaders find the new file.
  vkt::models::write_checkpoint(dir.path.string(), tensors);
  CHECK_FALSE(std::filesystem::exists(dir.path / "model.safetensors.index.json"));
  CHECK(SafetensorsArchive::open(dir.path.string()).path() == dir / "model.safetensors");
}

TEST_CASE("damaged safetensors files are refused naming the file and the entry") {
  TempDir dir;
  const std::string file = dir / "model.safetensors";
  const auto refused = [&](const std::vector<char>& bytes) {
    vkt::test::write_file(file, bytes);
    return vkt::test::error_of([&] { (void)SafetensorsArchive::open(file); });
  };
  const std::string prefix = "safetensors file '" + file + "': ";
  CHECK(refused({'\x01', '\x02'}) ==
        prefix + "it has 2 bytes, fewer than the 8-byte header length (is the file truncated?)");
  std::vector<char> huge_length = raw_file("{}", "");
  huge_length[5] = 1;
  CHECK(refused(huge_length) ==
        prefix +
            "its header length field says 1099511627778 bytes but the file has 2 after it "
            "and headers are at most 104857600 (is the file truncated, or not a "
            "safetensors file?)");
  CHECK_THAT(refused(raw_file("{\"a\":", "")),
             Contains(prefix.substr(0, prefix.size() - 2) + " header: not valid JSON"));
  CHECK(refused(raw_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})",
                         std::string(8, '\0'))) ==
        prefix +
            "entry \"w\" has data_offsets [0, 16] outside the 8-byte data section (is the "
            "file truncated?)");
  CHECK(refused(raw_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})",
                         std::string(8, '\0'))) ==
        prefix +
            "entry \"w\" has data_offsets [8, 0] outside the 8-byte data section (is the "
            "file truncated?)");
  CHECK(refused(raw_file(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
                         std::string(8, '\0'))) ==
        prefix + "entry \"w\" of shape [3] (F32) needs 12 bytes but its data_offsets span 8");
  CHECK(refused(raw_file(
            R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", "")) ==
        prefix +
            "entry \"w\" has shape \"[4294967296,4294967296]\": dimensions must be integers "
            ">= 0 whose product's bytes fit in 64 bits");
  CHECK_THAT(refused(raw_file(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", "")),
             Contains("entry \"w\" has shape \"[-1]\""));
  CHECK(refused(raw_file(R"({"w":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})", "x")) ==
        prefix +
            "entry \"w\" has dtype \"\\\"Q4\\\"\", not a safetensors dtype (F32, F16, BF16, "
            "I64, ...)");
  CHECK(refused(raw_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                         R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                         std::string(8, '\0'))) ==
        "safetensors file '" + file +
            "' header: key \"w\" appears twice in one object (a "
            "damaged or hand-edited file; keep one)");
  CHECK(refused(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                         R"("b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                         std::string(8, '\0'))) ==
        prefix +
            "entry \"b\" starts at byte 0 of the data section, not 4 where the entries "
            "before it end (overlapping entries or a gap)");
  CHECK(refused(raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                         std::string(8, '\0'))) ==
        prefix + "the data section has 8 bytes but the entries cover 4");
  CHECK(vkt::test::error_of([&] { (void)SafetensorsArchive::open(dir / "none"); }) ==
        "safetensors file '" + dir / "none" +
            "': it is not a readable regular file (check the path and its permissions)");
}

TEST_CASE("entries of other dtypes are listed and refused only when read") {
  TempDir dir;
  const std::string file = dir / "model.safetensors";
  vkt::test::write_file(file, raw_file(R"({"ids":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},)"
                                       R"("w":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                                       std::string(8, '\0') + std::string("\0\0\x80\x3f", 4)));
  const SafetensorsArchive archive = SafetensorsArchive::open(file);
  CHECK(archive.entry("ids").dtype == "I64");
  CHECK(archive.read_floats("w") == std::vector<float>{1.0f});
  CHECK(vkt::test::error_of([&] { (void)archive.read_floats("ids"); }) ==
        "safetensors file '" + file +
            "': entry \"ids\" has dtype I64; vktower reads F32, F16 "
            "and BF16 entries only (convert the checkpoint, e.g. to bf16)");
}

TEST_CASE("a checkpoint index naming shards outside its directory or missing is refused") {
  TempDir dir;
  const std::vector<TensorToWrite> tensors{{.name = "w", .shape = {1}, .values = {1.0f}}};
  vkt::models::write_safetensors_file(dir / "s1.safetensors", tensors);
  const std::string index = dir / "model.safetensors.index.json";
  const auto refused = [&](const std::string& text) {
    std::ofstream(index, std::ios::trunc) << text;
    return vkt::test::error_of([&] { (void)SafetensorsArchive::open(dir.path.string()); });
  };
  const std::string prefix = "checkpoint index '" + index + "': ";
  std::ofstream(index) << R"({"metadata":{},"weight_map":{"w":"s1.safetensors"}})";
  CHECK(SafetensorsArchive::open(dir.path.string()).read_floats("w") == std::vector<float>{1.0f});
  CHECK(refused(R"({"weight_map":{"w":"../s1.safetensors"}})") ==
        prefix +
            "weight_map gives entry \"w\" the shard \"\\\"../s1.safetensors\\\"\", not a file "
            "name in the index's directory (no '/', '..' or absolute path)");
  CHECK_THAT(refused(R"({"weight_map":{"w":"/etc/passwd"}})"),
             Contains("not a file name in the index's directory"));
  CHECK_THAT(refused(R"({"weight_map":{"w":".."}})"), Contains("not a file name"));
  CHECK(refused(R"({"weight_map":{"w":"s2.safetensors"}})") ==
        prefix +
            "weight_map names shard \"s2.safetensors\" (for entry \"w\"), which does not "
            "exist in \"" +
            dir.path.string() + "\" (copy every shard beside the index)");
  CHECK(refused(R"({"weight_map":{"w":"s1.safetensors","v":"s1.safetensors"}})") ==
        prefix + "weight_map places entry \"v\" in shard '" + dir / "s1.safetensors" +
            "', which does not hold it (a stale index: write the checkpoint again)");
  CHECK(refused(R"({"weight_map":{}})") == prefix + "its weight_map lists no entries");
  CHECK(refused(R"({"weight_map":{"w":"s1.safetensors","w":"s1.safetensors"}})") ==
        "checkpoint index '" + index +
            "': key \"w\" appears twice in one object (a damaged or "
            "hand-edited file; keep one)");
  CHECK(refused(R"({"metadata":{}})") ==
        prefix + "it has no \"weight_map\" object of entry name -> shard file");
}

TEST_CASE("safetensors files written by torch are read, and torch reads vktower's", "[torch]") {
  const std::optional<std::string> python = vkt::test::torch_python();
  if (!python) {
    WARN(vkt::test::kNoTorch);
    return;
  }
  TempDir dir;
  const std::string script =
      (vkt::test::source_dir() / "tests/models/safetensors_python.py").string();
  const auto run = [&](const char* mode) {
    const std::string command =
        "'" + *python + "' '" + script + "' " + mode + " '" + dir.path.string() + "'";
    REQUIRE(std::system(command.c_str()) == 0);
  };
  run("write");
  const SafetensorsArchive from_torch = SafetensorsArchive::open(dir / "py.safetensors");
  std::vector<float> thirds;
  for (int i = 0; i < 6; ++i) thirds.push_back(static_cast<float>(i) / 3.0f);
  CHECK(from_torch.entry("f16").shape == std::vector<std::int64_t>{2, 3});
  CHECK(vkt::test::float_bits(from_torch.read_floats("f32")) == vkt::test::float_bits(thirds));
  CHECK(from_torch.read_half_bits("f16") == vkt::to_half(thirds, vkt::DType::F16));
  CHECK(from_torch.read_half_bits("bf16") == vkt::to_half(thirds, vkt::DType::BF16));

  const auto tensors = mixed_tensors();
  vkt::models::write_safetensors_file(dir / "cpp.safetensors", tensors);
  run("echo");
  const SafetensorsArchive ours = SafetensorsArchive::open(dir / "cpp.safetensors");
  const SafetensorsArchive echoed = SafetensorsArchive::open(dir / "echo.safetensors");
  REQUIRE(echoed.entries().size() == tensors.size());
  for (const auto& e : ours.entries()) {
    CHECK(echoed.entry(e.name).shape == e.shape);
    CHECK(echoed.entry(e.name).dtype == "F32");
    CHECK(vkt::test::float_bits(echoed.read_floats(e.name)) ==
          vkt::test::float_bits(ours.read_floats(e.name)));
  }
}
