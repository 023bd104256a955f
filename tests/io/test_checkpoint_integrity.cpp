// Checkpoint integrity: every single changed byte of a file is refused naming
// the file; the header's fields are cross-checked (offsets, listing, shapes,
// element counts) so edited headers are refused even in files written before
// the header had a checksum; shapes from files never overflow.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <vktower/optimizers/adam.h>
#include <vktower/runtime/graph/executor.h>
#include <vktower/runtime/graph/graph.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/reduce.h>
#include <vktower/runtime/io/checkpoint.h>

#include "../shared_device.h"
#include "../test_support.h"

using Catch::Matchers::Contains;
using vkt::Initializer;
using vkt::Tensor;
using vkt::test::TempDir;

namespace {

// A small trained model (two variables and Adam's slots) saved at `step`.
std::string saved_checkpoint(const TempDir& dir, std::uint64_t step) {
  vkt::Graph graph(vkt::test::shared_device(), {.seed = 3});
  const Tensor w = graph.variable("hidden1/weights", {2, 3}, Initializer::uniform(-1.0f, 1.0f));
  const Tensor b = graph.variable("hidden1/bias", {3}, Initializer::uniform(-1.0f, 1.0f));
  vkt::Adam adam(0.1f);
  const Tensor train =
      adam.minimize(vkt::reduce_sum(vkt::square(w)) + vkt::reduce_sum(vkt::square(b)));
  vkt::Executor e(graph, {train});
  e.run();
  graph.set_global_step(step);
  const std::string path = dir / "model.safetensors";
  vkt::save_checkpoint(graph, path);
  return path;
}

struct Split {
  std::string header;  // without the padding
  std::string data;
};

Split split(const std::string& file) {
  std::uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  std::string header = file.substr(8, n);
  while (header.back() == ' ') header.pop_back();
  return {header, file.substr(8 + n)};
}

// A file from a header (padded to 8 bytes here) and a data section.
std::string join(std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string file(8, '\0');
  const std::uint64_t n = header.size();
  std::memcpy(file.data(), &n, 8);
  return file + header + data;
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const std::size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), to);
  return text;
}

// The file as the code before header_crc32 wrote it: format "vktower", no header checksum.
std::string unversioned(const std::string& file) {
  Split s = split(file);
  const std::size_t at = s.header.find(R"(,"header_crc32":")");
  REQUIRE(at != std::string::npos);
  s.header.erase(at, std::string(R"(,"header_crc32":"01234567")").size());
  return join(replaced(s.header, R"("format":"vktower-2")", R"("format":"vktower")"), s.data);
}

// `header`'s data_offsets of tensors `a` and `b` exchanged.
std::string swap_offsets(std::string header, const std::string& a, const std::string& b) {
  const auto offsets_of = [&](const std::string& name) {
    const std::size_t entry = header.find("\"" + name + "\":{\"data_offsets\":[");
    REQUIRE(entry != std::string::npos);
    const std::size_t begin = header.find('[', entry);
    return std::pair{begin, header.find(']', begin) + 1 - begin};
  };
  const auto [pa, na] = offsets_of(a);
  const auto [pb, nb] = offsets_of(b);
  const std::string oa = header.substr(pa, na), ob = header.substr(pb, nb);
  // The later one first, so that the earlier position stays valid.
  if (pa > pb) {
    header.replace(pa, na, ob);
    header.replace(pb, nb, oa);
  } else {
    header.replace(pb, nb, oa);
    header.replace(pa, na, ob);
  }
  return header;
}

void require_refused(const std::string& path, const std::string& problem) {
  const std::string message = vkt::test::error_of([&] { (void)vkt::read_checkpoint(path); });
  CHECK_THAT(message, Contains("checkpoint '" + path + "'"));
  CHECK_THAT(message, Contains(problem));
}

}  // namespace

TEST_CASE("every single changed byte of a checkpoint file is refused naming the file") {
  TempDir dir;
  const std::string good = saved_checkpoint(dir, 20);
  const std::string file = vkt::test::read_file(good);
  const std::uint64_t header_end = 8 + split(file).header.size();
  REQUIRE(vkt::read_checkpoint(good).size() == 8);  // 2 variables, 3 Adam slots each
  const std::string bad = dir / "bad.safetensors";
  int refused = 0;
  for (std::size_t i = 0; i < file.size(); ++i) {
    // Two changes per byte: the lowest bit (a space becomes '!', a digit its
    // neighbour) and the highest (ASCII becomes invalid UTF-8).
    for (const unsigned char flip : {0x01, 0x80}) {
      std::string changed = file;
      changed[i] = static_cast<char>(changed[i] ^ flip);
      vkt::test::write_file(bad, changed);
      INFO("byte " << i << " of " << file.size() << " xor " << int(flip));
      const std::string message = vkt::test::error_of([&] { (void)vkt::read_checkpoint(bad); });
      CHECK_THAT(message, Contains("checkpoint '" + bad + "' cannot be loaded"));
      // The header alone (what the Estimator reads for the global step) is covered too.
      if (i < header_end) {
        CHECK_THAT(vkt::test::error_of([&] { (void)vkt::checkpoint_global_step(bad); }),
                   Contains(bad));
      }
      ++refused;
    }
  }
  CHECK(refused == static_cast<int>(2 * file.size()));
  CHECK(vkt::checkpoint_global_step(good) == 20);
}

TEST_CASE("a checkpoint whose tensors' offsets were swapped is refused") {
  TempDir dir;
  const std::string file = vkt::test::read_file(saved_checkpoint(dir, 20));
  const std::string path = dir / "swapped.safetensors";
  // hidden1/bias and its Adam slot have the same size: the data section and its
  // crc are untouched, only the header says which bytes are whose.
  const Split s = split(file);
  vkt::test::write_file(
      path, join(swap_offsets(s.header, "hidden1/bias", "hidden1/bias/Adam/m"), s.data));
  require_refused(path, "the header's crc32");

  // Without the header checksum (a file of the previous format) the listing
  // of the variables in data order still catches it.
  const Split old = split(unversioned(file));
  vkt::test::write_file(
      path, join(swap_offsets(old.header, "hidden1/bias", "hidden1/bias/Adam/m"), old.data));
  require_refused(path, "offsets out of order, overlapping or with a gap");
}

TEST_CASE("a checkpoint whose global_step was edited is refused") {
  TempDir dir;
  const std::string file = vkt::test::read_file(saved_checkpoint(dir, 20));
  const std::string path = dir / "edited.safetensors";
  vkt::test::write_file(path, replaced(file, R"("global_step":"20")", R"("global_step":"21")"));
  require_refused(path, "the header was changed or damaged");
  CHECK_THAT(vkt::test::error_of([&] { (void)vkt::checkpoint_global_step(path); }),
             Contains("the header was changed or damaged"));
}

TEST_CASE("a checkpoint written before header checksums still loads, fields cross-checked") {
  TempDir dir;
  const std::string good = saved_checkpoint(dir, 20);
  const std::string path = dir / "v1.safetensors";
  vkt::test::write_file(path, unversioned(vkt::test::read_file(good)));
  const auto values = vkt::read_checkpoint(path);
  CHECK(values.at("hidden1/bias").f32 == vkt::read_checkpoint(good).at("hidden1/bias").f32);
  CHECK(vkt::checkpoint_global_step(path) == 20);

  const Split s = split(vkt::test::read_file(path));
  SECTION("a shape changed to another of the same size") {
    vkt::test::write_file(path,
                          join(replaced(s.header, R"("shape":[2,3])", R"("shape":[3,2])"), s.data));
    require_refused(path, R"(is [3, 2] in the header but "[2,3]" in metadata "variables")");
  }
  SECTION("a global_step that is not a plain decimal") {
    vkt::test::write_file(
        path, join(replaced(s.header, R"("global_step":"20")", R"("global_step":"+20")"), s.data));
    require_refused(path, R"(metadata "global_step" is "+20", not a decimal number)");
  }
}

TEST_CASE(
    "a checkpoint's shapes are checked before any arithmetic, every refusal naming the file") {
  TempDir dir;
  const std::string path = dir / "crafted.safetensors";
  // Files of the unversioned format (no header checksum), so that each field
  // check is reached; an empty data section has crc32 0.
  const auto crafted = [&](const std::string& shape, const std::string& offsets) {
    const std::string listing = R"([{\"name\":\"x\",\"shape\":)" + shape + "}]";
    vkt::test::write_file(
        path, join(R"({"__metadata__":{"crc32":"0","format":"vktower","global_step":"0",)"
                   R"("variables":")" +
                       listing + R"("},"x":{"data_offsets":)" + offsets +
                       R"(,"dtype":"F32","shape":)" + shape + "}}",
                   ""));
  };
  // [2^32, 2^32] floats in 0 bytes: the element count overflows 64 bits.
  crafted("[4294967296,4294967296]", "[0,0]");
  require_refused(path, "each dimension must be at least 1 and the elements at most");
  crafted("[0]", "[0,0]");
  require_refused(path, "has shape \"[0]\"");
  crafted("[1,1,1,1,1,1,1]", "[0,4]");
  require_refused(path, "has rank 7");
  crafted("[-1]", "[0,0]");
  require_refused(path, "has shape \"[-1]\"");
  crafted("[18446744073709551615]", "[0,0]");
  require_refused(path, "each dimension must be at least 1");
  crafted("[1]", "[0,18446744073709551615]");
  require_refused(path, "outside the 0-byte data section");
  crafted("[]", "[0,0]");  // a scalar needs 4 bytes
  require_refused(path, "needs 4 bytes but its data_offsets span 0");
  vkt::test::write_file(path,
                        join(R"({"__metadata__":{"crc32":"0","format":"vktower","global_step":"0",)"
                             R"("variables":"[]"}})",
                             ""));
  CHECK(vkt::read_checkpoint(path).empty());  // a model without variables is valid
  require_refused(dir.path.string(), "not a regular file");
}

TEST_CASE("shapes refuse more elements than any device holds instead of overflowing") {
  const std::int64_t big = std::int64_t{1} << 32;
  CHECK_THAT(vkt::test::error_of([&] {
               vkt::Shape({big, big});
             }),
             Contains("shape [4294967296, 4294967296] has more than 281474976710656 elements"));
  CHECK_THAT(vkt::test::error_of([&] { vkt::Shape({big, big, big, big}); }), Contains("more than"));
  CHECK(vkt::Shape({std::int64_t{1} << 24, std::int64_t{1} << 24}).elements() == std::int64_t{1}
                                                                                     << 48);
}

TEST_CASE(
    "a checkpoint's measured shard weights round-trip exactly, and a header holding anything "
    "but numbers above 0 there is refused") {
  TempDir dir;
  vkt::Graph graph(vkt::test::shared_device(), {.seed = 3});
  graph.variable("w", {2}, Initializer::uniform(-1.0f, 1.0f));
  vkt::Graph* const graphs[] = {&graph};
  const std::string path = dir / "measured.safetensors";
  const std::vector<double> weights{20.125, 1.0 / 3.0, 1e-3};
  vkt::save_checkpoint(graphs, 7, path, weights);
  CHECK(vkt::checkpoint_shard_weights(path) == weights);
  CHECK(vkt::checkpoint_shard_weights(saved_checkpoint(dir, 5)).empty());

  const Split s = split(unversioned(vkt::test::read_file(path)));
  const std::string crafted = dir / "crafted.safetensors";
  const std::string key = R"("shard_weights":")";
  const std::size_t from = s.header.find(key) + key.size();
  REQUIRE(from != std::string::npos + key.size());
  const std::size_t to = s.header.find('"', from);
  for (const char* bad : {"abc", "1,-2", "1,,2", "nan", "", "1,inf", "0x10", "1 ,2"}) {
    INFO(bad);
    std::string header = s.header;
    header.replace(from, to - from, bad);
    vkt::test::write_file(crafted, join(header, s.data));
    require_refused(crafted, R"(metadata "shard_weights")");
  }
}
