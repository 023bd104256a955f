// Checkpoints: safetensors round trip of variables, slots and the step; every
// kind of broken file refused before anything changes; the manager's index,
// retention and tolerance of files left by a crashed save.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <vktower/optimizers/adam.h>
#include <vktower/runtime/graph/executor.h>
#include <vktower/runtime/graph/graph.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/reduce.h>
#include <vktower/runtime/io/atomic_file.h>
#include <vktower/runtime/io/checkpoint.h>
#include <vktower/runtime/io/checkpoint_file.h>
#include <vktower/runtime/io/checkpoint_manager.h>

#include "../shared_device.h"
#include "../test_support.h"

using Catch::Matchers::Contains;
using vkt::Initializer;
using vkt::Shape;
using vkt::Tensor;
namespace fs = std::filesystem;

using vkt::test::TempDir;

namespace {

// A model with two variables and Adam's slots for each; `w_shape` and `extra`
// make graphs that do not match the checkpoint.
struct Model {
  vkt::Graph graph;
  vkt::Adam adam{0.1f};
  Tensor train;
  Model(std::uint64_t seed, Shape w_shape = {3, 4}, bool extra = false)
      : graph(vkt::test::shared_device(), {.seed = seed}) {
    const Tensor w = graph.variable("dense/w", w_shape, Initializer::uniform(-1.0f, 1.0f));
    const Tensor b = graph.variable("dense/b", {4}, Initializer::uniform(-1.0f, 1.0f));
    Tensor loss = vkt::reduce_sum(vkt::square(w)) + vkt::reduce_sum(vkt::square(b));
    if (extra) {
      const Tensor e = graph.variable("dense/extra", {2}, Initializer::ones());
      loss = loss + vkt::reduce_sum(vkt::square(e));
    }
    train = adam.minimize(loss);
  }
};

using Snapshot = std::vector<std::vector<std::uint32_t>>;

// Every variable's bits, in creation order.
Snapshot snapshot(vkt::Graph& g) {
  Snapshot s;
  for (const vkt::Variable& v : g.variables()) {
    std::vector<std::uint32_t> bits;
    for (float x : g.values(v.tensor)) bits.push_back(std::bit_cast<std::uint32_t>(x));
    s.push_back(std::move(bits));
  }
  return s;
}

// A model trained for a few Adam steps, so that values and slots are non-trivial.
std::unique_ptr<Model> trained(int steps) {
  auto m = std::make_unique<Model>(1);
  vkt::Executor e(m->graph, {m->train});
  for (int i = 0; i < steps; ++i) e.run();
  return m;
}

// Loading `path` into `m` must fail naming the file and `problem`, and change nothing.
void require_refused(Model& m, const std::string& path, const std::string& problem) {
  const Snapshot before = snapshot(m.graph);
  const std::uint64_t step = m.graph.global_step();
  const std::string message = vkt::test::error_of([&] { vkt::load_checkpoint(m.graph, path); });
  CHECK_THAT(message, Contains(path));
  CHECK_THAT(message, Contains(problem));
  CHECK(snapshot(m.graph) == before);
  CHECK(m.graph.global_step() == step);
}

}  // namespace

TEST_CASE("a checkpoint restores every variable, slot and the step bit for bit") {
  TempDir dir;
  auto source = trained(3);
  REQUIRE(source->graph.global_step() == 3);
  REQUIRE(source->graph.variables().size() > 2);  // Adam's slots are variables too
  const std::string path = dir / "model.safetensors";
  vkt::save_checkpoint(source->graph, path);

  Model target(99);  // another seed: every initial value differs
  REQUIRE(snapshot(target.graph) != snapshot(source->graph));
  vkt::load_checkpoint(target.graph, path);
  CHECK(snapshot(target.graph) == snapshot(source->graph));
  CHECK(target.graph.global_step() == 3);

  // Saving again over the file replaces it and leaves no temporary file behind.
  vkt::Executor e(source->graph, {source->train});
  e.run();
  vkt::save_checkpoint(source->graph, path);
  vkt::load_checkpoint(target.graph, path);
  CHECK(snapshot(target.graph) == snapshot(source->graph));
  CHECK(target.graph.global_step() == 4);
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1);
}

TEST_CASE("a checkpoint is a safetensors file") {
  TempDir dir;
  auto m = trained(2);
  const std::string path = dir / "model.safetensors";
  vkt::save_checkpoint(m->graph, path);
  const std::vector<char> file = vkt::test::read_file<std::vector<char>>(path);

  REQUIRE(file.size() > 8);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | static_cast<unsigned char>(file[i]);  // little-endian
  REQUIRE(8 + n <= file.size());
  CHECK(n % 8 == 0);  // data section aligned, as the reference writer does
  const std::string header(file.data() + 8, n);
  CHECK(header.front() == '{');
  // dense/w (3x4 floats) comes first in the data section, dense/b right after.
  const std::string entry = R"("dense/b":{"data_offsets":[48,64],"dtype":"F32","shape":[4]})";
  CHECK_THAT(header, Contains(entry));
  CHECK_THAT(header, Contains(R"("format":"vktower-2")"));
  CHECK_THAT(header, Contains(R"("header_crc32":")"));
  CHECK_THAT(header, Contains(R"("global_step":"2")"));
  CHECK_THAT(header, Contains("crc32"));
  CHECK_THAT(header, Contains(R"(\"name\":\"dense/w\")"));  // the "variables" listing

  std::vector<float> b(4);
  std::memcpy(b.data(), file.data() + 8 + n + 48, 16);
  const Tensor bias = *m->graph.find_variable("dense/b");
  CHECK(b == m->graph.values(bias));
  std::uint64_t data_bytes = 0;
  for (const vkt::Variable& v : m->graph.variables()) data_bytes += 4 * v.tensor.shape().elements();
  CHECK(file.size() == 8 + n + data_bytes);
}

TEST_CASE("damaged checkpoint files are refused before anything is loaded") {
  TempDir dir;
  auto source = trained(2);
  const std::string good = dir / "good.safetensors";
  vkt::save_checkpoint(source->graph, good);
  const std::vector<char> file = vkt::test::read_file<std::vector<char>>(good);
  std::uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  Model target(7);
  const std::string bad = dir / "bad.safetensors";

  SECTION("truncated anywhere") {
    for (std::size_t size : {std::size_t{0}, std::size_t{5}, std::size_t{8}, std::size_t{20},
                             static_cast<std::size_t>(8 + n), file.size() - 1}) {
      INFO("truncated to " << size << " bytes");
      vkt::test::write_file(bad, std::vector<char>(file.begin(), file.begin() + size));
      require_refused(target, bad, "truncated");
    }
  }
  SECTION("a flipped data byte") {
    std::vector<char> flipped = file;
    flipped[8 + n + 5] ^= 0x10;
    vkt::test::write_file(bad, flipped);
    require_refused(target, bad, "crc32");
  }
  SECTION("garbage JSON") {
    std::vector<char> garbage = file;
    std::memcpy(garbage.data() + 8, "{\"x\":[!", 7);
    vkt::test::write_file(bad, garbage);
    require_refused(target, bad, "not valid JSON");
  }
  SECTION("a file that is not a checkpoint") {
    vkt::test::write_file(bad, std::vector<char>(100, 'x'));
    require_refused(target, bad, "header length");
  }
  SECTION("a missing file") {
    require_refused(target, dir / "none.safetensors", "cannot be opened");
  }
  // The untouched file still loads into the graph the failures left alone.
  vkt::load_checkpoint(target.graph, good);
  CHECK(snapshot(target.graph) == snapshot(source->graph));
}

TEST_CASE("a checkpoint of another model is refused with what differs") {
  TempDir dir;
  auto source = trained(1);
  const std::string path = dir / "model.safetensors";
  vkt::save_checkpoint(source->graph, path);

  SECTION("a wrong shape") {
    Model other(7, {4, 3});
    require_refused(
        other, path,
        "was written by another model ('dense/w' is [3, 4] in it, [4, 3] in the model, and 3 "
        "more differences); give another RunConfig.model_dir, or build the model that "
        "wrote it");
  }
  SECTION("a variable missing from the file") {
    Model other(7, {3, 4}, true);
    require_refused(other, path,
                    "(the model's 'dense/extra' is not in it, and 3 more differences)");
  }
  SECTION("a variable the graph lacks") {
    auto bigger = std::make_unique<Model>(7, Shape{3, 4}, true);
    const std::string big_path = dir / "big.safetensors";
    vkt::save_checkpoint(bigger->graph, big_path);
    Model other(7);
    require_refused(other, big_path,
                    "(its 'dense/extra' is not in the model, and 3 more differences)");
  }
}

TEST_CASE("the checkpoint manager keeps the newest files and names the latest") {
  TempDir dir;
  auto m = trained(1);
  vkt::CheckpointManager manager(dir.path.string(), 2);
  CHECK_FALSE(manager.latest().has_value());
  Model fresh(5);
  CHECK_FALSE(manager.restore_latest(fresh.graph));

  for (std::uint64_t step : {10u, 20u, 30u}) {
    m->graph.set_global_step(step);
    CHECK(manager.save(m->graph) == dir / ("ckpt-" + std::to_string(step) + ".safetensors"));
  }
  CHECK_FALSE(fs::exists(dir / "ckpt-10.safetensors"));
  CHECK(fs::exists(dir / "ckpt-20.safetensors"));
  CHECK(fs::exists(dir / "ckpt-30.safetensors"));
  CHECK(fs::exists(dir / "checkpoint"));
  CHECK(manager.latest() == dir / "ckpt-30.safetensors");
  // Another manager on the same directory (a restarted process) sees the same.
  vkt::CheckpointManager again(dir.path.string(), 2);
  CHECK(again.latest() == dir / "ckpt-30.safetensors");
  REQUIRE(again.restore_latest(fresh.graph));
  CHECK(fresh.graph.global_step() == 30);
  CHECK(snapshot(fresh.graph) == snapshot(m->graph));

  CHECK_THAT(vkt::test::error_of([&] { vkt::CheckpointManager(dir.path.string(), 0); }),
             Contains("keep_max"));
}

TEST_CASE("files left by a crashed save do not break loading the previous checkpoint") {
  TempDir dir;
  auto m = trained(2);
  vkt::CheckpointManager manager(dir.path.string(), 3);
  const std::string saved = manager.save(m->graph);
  const std::vector<char> file = vkt::test::read_file<std::vector<char>>(saved);
  // What a save killed mid-write leaves: half-written temporary files, for the
  // next checkpoint and for the index, next to the intact previous ones.
  vkt::test::write_file(dir / "ckpt-3.safetensors.tmp.Ab3dEf",
                        std::vector<char>(file.begin(), file.begin() + file.size() / 2));
  vkt::test::write_file(dir / "checkpoint.tmp.Xy9z01", std::string("{\"l"));

  Model fresh(8);
  REQUIRE(manager.restore_latest(fresh.graph));
  CHECK(fresh.graph.global_step() == 2);
  CHECK(snapshot(fresh.graph) == snapshot(m->graph));
  // And the next save goes through despite the stale files.
  m->graph.set_global_step(3);
  CHECK(manager.save(m->graph) == dir / "ckpt-3.safetensors");
  CHECK(manager.latest() == dir / "ckpt-3.safetensors");
  vkt::load_checkpoint(fresh.graph, *manager.latest());
  CHECK(fresh.graph.global_step() == 3);
}

TEST_CASE("remove_interrupted_saves deletes what killed saves left there, and nothing else") {
  TempDir dir;
  auto m = trained(2);
  vkt::CheckpointManager manager(dir.path.string(), 3);
  manager.save(m->graph);
  const std::vector<std::string> leftovers = {
      "ckpt-3.safetensors.tmp.Ab3dEf", "checkpoint.tmp.Xy9z01", "ckpt-40.safetensors.tmp.000000"};
  // Not a killed save's: another program's, a name the manager never writes,
  // a suffix mkstemp never makes, a directory.
  const std::vector<std::string> kept = {
      "metrics.csv.tmp.Ab3dEf",       "ckpt-03.safetensors.tmp.Ab3dEf",
      "ckpt-3.safetensors.tmp.Ab3dE", "ckpt-3.safetensors.tmp.Ab-dEf",
      "ckpt-3.safetensorstmp.Ab3dEf", "notes.txt"};
  std::uintmax_t bytes = 0;
  for (std::size_t i = 0; i < leftovers.size(); ++i) {
    vkt::test::write_file(dir / leftovers[i], std::string(100 * (i + 1), 'x'));
    bytes += 100 * (i + 1);
  }
  for (const std::string& name : kept) vkt::test::write_file(dir / name, std::string("keep"));
  fs::create_directory(dir / "ckpt-5.safetensors.tmp.QQQQQQ");

  const vkt::CheckpointManager::Removed removed = manager.remove_interrupted_saves();
  CHECK(removed.files == 3);
  CHECK(removed.bytes == bytes);
  for (const std::string& name : leftovers) CHECK_FALSE(fs::exists(dir / name));
  for (const std::string& name : kept) CHECK(fs::exists(dir / name));
  CHECK(fs::is_directory(dir / "ckpt-5.safetensors.tmp.QQQQQQ"));
  CHECK(manager.latest() == dir / "ckpt-2.safetensors");
  Model fresh(8);
  REQUIRE(manager.restore_latest(fresh.graph));
  CHECK(snapshot(fresh.graph) == snapshot(m->graph));
  CHECK(manager.remove_interrupted_saves().files == 0);
}

namespace {

// Bytes this process has read through read() and the like so far (Linux's
// /proc/self/io "rchar", which counts its own reading too: a few hundred).
std::uint64_t bytes_read_so_far() {
  std::ifstream io("/proc/self/io");
  for (std::string key; io >> key;) {
    std::uint64_t value = 0;
    io >> value;
    if (key == "rchar:") return value;
  }
  FAIL("/proc/self/io has no rchar");
  return 0;
}

}  // namespace

TEST_CASE("checkpoint_global_step and checkpoint_shard_weights read the header alone") {
  TempDir dir;
  const std::string path = dir / "big.safetensors";
  const std::vector<vkt::detail::CheckpointTensor> tensors = {
      {"w", Shape{1024, 4096}, std::vector<float>(1024 * 4096, 0.5f)}, {"b", Shape{3}, {1, 2, 3}}};
  const std::vector<double> shards = {3, 1};
  vkt::test::write_file(path, vkt::detail::encode_checkpoint(path, tensors, 77, shards));

  const std::uint64_t before = bytes_read_so_far();
  CHECK(vkt::checkpoint_global_step(path) == 77);
  CHECK(vkt::checkpoint_shard_weights(path) == shards);
  const std::uint64_t read = bytes_read_so_far() - before;
  CHECK(read < 64 * 1024);  // the file: 16 MiB
  const vkt::detail::CheckpointFile header = vkt::detail::CheckpointFile::read_header(path);
  CHECK(header.entries().at("w").end == 1024 * 4096 * 4);
  CHECK(header.entries().at("b").shape == Shape{3});
  CHECK_THAT(vkt::test::error_of([&] { (void)header.values("b"); }), Contains("read_header"));

  // A data section cut short is refused as the whole read refuses it.
  fs::resize_file(path, fs::file_size(path) - 4);
  const std::string whole =
      vkt::test::error_of([&] { vkt::detail::CheckpointFile::read(path, false); });
  CHECK_THAT(whole, Contains("cannot be loaded"));
  CHECK(vkt::test::error_of([&] { vkt::checkpoint_global_step(path); }) == whole);
  // So is a header cut short, and a file shorter than the length field.
  fs::resize_file(path, 20);
  CHECK_THAT(vkt::test::error_of([&] { vkt::checkpoint_global_step(path); }),
             Contains("its header length field says"));
  fs::resize_file(path, 5);
  CHECK_THAT(vkt::test::error_of([&] { vkt::checkpoint_shard_weights(path); }),
             Contains("it has 5 bytes, fewer than the 8-byte header length"));
}

TEST_CASE("a save killed at a random moment leaves a loadable checkpoint") {
  TempDir dir;
  auto m = trained(1);
  const std::string path = dir / "model.safetensors";
  vkt::save_checkpoint(m->graph, dir / "step1.safetensors");
  m->graph.set_global_step(2);
  vkt::save_checkpoint(m->graph, dir / "step2.safetensors");
  const std::vector<char> versions[2] = {
      vkt::test::read_file<std::vector<char>>(dir / "step1.safetensors"),
      vkt::test::read_file<std::vector<char>>(dir / "step2.safetensors")};
  vkt::write_file_atomically(path, versions[0]);

  std::mt19937 rng(42);
  Model target(3);
  for (int i = 0; i < 20; ++i) {
    // The child only writes the file (no Vulkan), as the tail of a save does.
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      vkt::write_file_atomically(path, versions[(i + 1) % 2]);
      ::_exit(0);
    }
    ::usleep(std::uniform_int_distribution<useconds_t>(0, 3000)(rng));
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    INFO("kill " << i);
    vkt::load_checkpoint(target.graph, path);  // throws if the file is torn
    CHECK((target.graph.global_step() == 1 || target.graph.global_step() == 2));
  }
}

TEST_CASE("resume is exact: 20 steps equal 10, save, restart from the file, 10 more") {
  const std::unique_ptr<Model> straight = trained(20);
  TempDir dir;
  {
    const std::unique_ptr<Model> first_half = trained(10);
    vkt::save_checkpoint(first_half->graph, dir / "half.safetensors");
  }
  Model resumed(99);  // another seed: every value must come from the file
  vkt::load_checkpoint(resumed.graph, dir / "half.safetensors");
  CHECK(resumed.graph.global_step() == 10);
  vkt::Executor e(resumed.graph, {resumed.train});
  for (int i = 0; i < 10; ++i) e.run();
  CHECK(resumed.graph.global_step() == 20);
  CHECK(snapshot(resumed.graph) == snapshot(straight->graph));
}

TEST_CASE("an evaluation graph takes its variables from a training checkpoint, slots left out") {
  TempDir dir;
  auto source = trained(2);
  const std::string path = dir / "model.safetensors";
  vkt::save_checkpoint(source->graph, path);
  CHECK(vkt::checkpoint_global_step(path) == 2);

  // The model without its optimizer: no slots.
  vkt::Graph eval(vkt::test::shared_device(), {.seed = 5});
  const Tensor w = eval.variable("dense/w", {3, 4}, Initializer::zeros());
  const Tensor b = eval.variable("dense/b", {4}, Initializer::zeros());
  // Exact matching refuses the extra slots; GraphSubset takes what the graph has.
  CHECK_THAT(vkt::test::error_of([&] { vkt::load_checkpoint(eval, path); }),
             Contains("is not in the model"));
  vkt::load_checkpoint(eval, path, vkt::CheckpointMatch::GraphSubset);
  CHECK(eval.values(w) == source->graph.values(*source->graph.find_variable("dense/w")));
  CHECK(eval.values(b) == source->graph.values(*source->graph.find_variable("dense/b")));
  CHECK(eval.global_step() == 2);
  // A variable the file lacks is still an error.
  vkt::Graph bigger(vkt::test::shared_device(), {.seed = 5});
  for (const char* name : {"dense/w", "dense/extra"}) {
    (void)bigger.variable(name, {3, 4}, Initializer::zeros());
  }
  CHECK_THAT(vkt::test::error_of(
                 [&] { vkt::load_checkpoint(bigger, path, vkt::CheckpointMatch::GraphSubset); }),
             Contains("(the model's 'dense/extra' is not in it)"));
  vkt::test::write_file(dir / "short", std::string("x"));
  CHECK_THAT(vkt::test::error_of([&] { (void)vkt::checkpoint_global_step(dir / "short"); }),
             Contains("truncated"));
}
