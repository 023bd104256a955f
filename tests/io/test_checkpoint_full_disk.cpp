// Nothing lost on a full disk: a checkpoint save that fails part-way (a file
// size limit, a full filesystem, the index's own write) names the file and the
// reason and leaves the previous checkpoint and the index as they were; an
// Estimator stops training there and a new one resumes from that checkpoint.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <vktower/optimizers/adam.h>
#include <vktower/optimizers/tower_optimizer.h>
#include <vktower/runtime/graph/executor.h>
#include <vktower/runtime/graph/graph.h>
#include <vktower/runtime/graph/ops/elementwise.h>
#include <vktower/runtime/graph/ops/layers.h>
#include <vktower/runtime/graph/ops/losses.h>
#include <vktower/runtime/graph/ops/reduce.h>
#include <vktower/runtime/io/atomic_file.h>
#include <vktower/runtime/io/checkpoint.h>
#include <vktower/runtime/io/checkpoint_manager.h>
#include <vktower/runtime/vulkan/detail/log.h>
#include <vktower/tower/estimator.h>
#include <vktower/tower/replicate.h>
#include <vktower/tower/training_log.h>

#include "../log_capture.h"
#include "../shared_device.h"
#include "../test_support.h"

using Catch::Matchers::Contains;
using vkt::Tensor;
using vkt::test::TempDir;
namespace fs = std::filesystem;

namespace {

// A variable of 4 KiB with Adam's two slots: a checkpoint of a few pages, so
// that a limit or a free space below it falls inside its data.
struct Model {
  vkt::Graph graph;
  vkt::Adam adam{0.1f};
  Tensor train;
  explicit Model(std::uint64_t seed) : graph(vkt::test::shared_device(), {.seed = seed}) {
    const Tensor w = graph.variable("w", {32, 32}, vkt::Initializer::uniform(-1.0f, 1.0f));
    train = adam.minimize(vkt::reduce_sum(vkt::square(w)));
  }
  void step() { vkt::Executor(graph, {train}).run(); }
};

using Snapshot = std::vector<std::vector<std::uint32_t>>;

Snapshot snapshot(vkt::Graph& g) {
  Snapshot s;
  for (const vkt::Variable& v : g.variables()) {
    std::vector<std::uint32_t> bits;
    for (float x : g.values(v.tensor)) bits.push_back(std::bit_cast<std::uint32_t>(x));
    s.push_back(std::move(bits));
  }
  return s;
}

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::ranges::sort(names);
  return names;
}

// The bytes `graph` saves to, measured on the ordinary disk.
std::vector<char> checkpoint_bytes(vkt::Graph& graph) {
  TempDir elsewhere;
  vkt::save_checkpoint(graph, elsewhere / "next.safetensors");
  return vkt::test::read_file<std::vector<char>>(elsewhere / "next.safetensors");
}

// The newest checkpoint and the index as they were before a save failed.
struct Saved {
  std::string dir, path, file, index;
  Snapshot values;
  std::uint64_t step = 0;

  static Saved of(const std::string& dir, const std::string& path, vkt::Graph& graph) {
    return {dir,
            path,
            vkt::test::read_file(path),
            vkt::test::read_file(fs::path(dir) / "checkpoint"),
            snapshot(graph),
            graph.global_step()};
  }
  // The same bytes, still the latest, and loadable into a fresh model.
  void require_intact() const {
    CHECK(vkt::test::read_file(path) == file);
    CHECK(vkt::test::read_file(fs::path(dir) / "checkpoint") == index);
    const vkt::CheckpointManager manager(dir, 1);
    CHECK(manager.latest() == path);
    Model fresh(99);
    vkt::load_checkpoint(fresh.graph, path);
    CHECK(fresh.graph.global_step() == step);
    CHECK(snapshot(fresh.graph) == values);
  }
};

// The message of the FileWriteError `fn` throws; any other outcome fails.
template <typename Fn>
std::string write_error_of(Fn&& fn) {
  try {
    fn();
  } catch (const vkt::FileWriteError& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("expected a vkt::FileWriteError, got: " << e.what());
  }
  FAIL("expected a vkt::FileWriteError, none was thrown");
  return {};
}

struct ChildEnd {
  int status = 0;
  std::string message;  // the vkt::Error the child caught
};

// Runs `body` in a forked child, so that a file size limit and a signal's
// disposition stay there; the child touches no Vulkan object (its driver's
// threads are not in it), only files. Exit 0 when body threw a FileWriteError.
ChildEnd in_child(const std::function<void()>& body) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(fds[0]);
    int code = 1;
    std::string message = "no error was thrown";
    try {
      body();
    } catch (const vkt::FileWriteError& e) {
      message = e.what();
      code = 0;
    } catch (const std::exception& e) {
      message = std::string("not a vkt::FileWriteError: ") + e.what();
      code = 2;
    }
    (void)!::write(fds[1], message.data(), message.size());
    ::_exit(code);
  }
  ::close(fds[1]);
  ChildEnd end;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) end.message.append(buffer, n);
  ::close(fds[0]);
  REQUIRE(::waitpid(child, &end.status, 0) == child);
  return end;
}

void limit_file_size(rlim_t bytes) {
  const rlimit none{0, 0};
  ::setrlimit(RLIMIT_CORE, &none);  // SIGXFSZ's default action would dump core
  const rlimit limit{bytes, bytes};
  if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(3);
}

// A tmpfs of a given size on a fresh directory, unmounted at scope exit (also
// when a check fails), and a filler file on it that takes all its space but
// what a test leaves free.
class SmallTmpfs {
 public:
  explicit SmallTmpfs(std::size_t bytes) {
    const std::string size = "size=" + std::to_string(bytes) + ",mode=0700";
    // Huge pages would count space in 2 MiB units; a kernel without them refuses the option.
    mounted_ = mount(size + ",huge=never") || (errno == EINVAL && mount(size));
    if (!mounted_) error_ = std::strerror(errno);
  }
  ~SmallTmpfs() {
    if (fd_ >= 0) ::close(fd_);
    if (mounted_) ::umount2(dir_.path.c_str(), MNT_DETACH);
  }
  SmallTmpfs(const SmallTmpfs&) = delete;
  SmallTmpfs& operator=(const SmallTmpfs&) = delete;

  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }
  std::string operator/(const std::string& name) const { return dir_ / name; }

  // Fills the filesystem, then frees `bytes` (whole blocks) of the filler.
  void fill_leaving(std::size_t bytes) {
    fd_ = ::open((dir_ / "filler").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    REQUIRE(fd_ >= 0);
    const std::vector<char> zeros(64 * 1024, 0);
    off_t size = 0;
    for (ssize_t n; (n = ::write(fd_, zeros.data(), zeros.size())) > 0;) size += n;
    REQUIRE(errno == ENOSPC);
    REQUIRE(free_bytes() == 0);
    const std::size_t block = block_size();
    const auto freed = static_cast<off_t>((bytes + block - 1) / block * block);
    REQUIRE(freed <= size);
    REQUIRE(::ftruncate(fd_, size - freed) == 0);
    REQUIRE(free_bytes() == static_cast<std::uint64_t>(freed));
  }
  void unfill() {
    ::close(fd_);
    fd_ = -1;
    fs::remove(dir_ / "filler");
  }
  std::uint64_t free_bytes() const {
    struct statvfs s {};
    REQUIRE(::statvfs(dir_.path.c_str(), &s) == 0);
    return static_cast<std::uint64_t>(s.f_bavail) * s.f_frsize;
  }

 private:
  bool mount(const std::string& options) {
    return ::mount("tmpfs", dir_.path.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) == 0;
  }
  std::size_t block_size() const {
    struct statvfs s {};
    REQUIRE(::statvfs(dir_.path.c_str(), &s) == 0);
    return s.f_frsize;
  }

  TempDir dir_;  // declared first: removed after the unmount
  bool mounted_ = false;
  std::string error_;
  int fd_ = -1;
};

}  // namespace

TEST_CASE("a save past the file size limit (RLIMIT_FSIZE) leaves the previous checkpoint",
          "[io][full_disk]") {
  TempDir dir;
  Model m(1);
  m.step();
  vkt::CheckpointManager manager(dir.path.string(), 1);
  const std::string first = manager.save(m.graph);
  const Saved saved = Saved::of(dir.path.string(), first, m.graph);
  m.step();
  const std::vector<char> next = checkpoint_bytes(m.graph);
  // Past the index (a few dozen bytes), inside the checkpoint's data: the
  // first write() is cut short there, the second finds the limit.
  const auto limit = static_cast<rlim_t>(next.size() / 2);
  REQUIRE(limit > 1024);
  const std::string second = dir / "ckpt-2.safetensors";
  const auto save_next = [&] {
    vkt::CheckpointManager(dir.path.string(), 1).save(2, [&](const std::string& path) {
      vkt::write_file_atomically(path, next);
    });
  };

  SECTION("SIGXFSZ ignored: write fails with EFBIG, named with the file and the fix") {
    const ChildEnd end = in_child([&] {
      std::signal(SIGXFSZ, SIG_IGN);
      limit_file_size(limit);
      save_next();
    });
    INFO(end.message);
    REQUIRE(WIFEXITED(end.status));
    CHECK(WEXITSTATUS(end.status) == 0);
    CHECK_THAT(end.message,
               Contains("cannot write '" + second + "': write failed: File too large"));
    CHECK_THAT(end.message, Contains("raise the limit"));
    CHECK_THAT(end.message, Contains("the previous checkpoint '" + first + "' is intact"));
    // keep_max 1 pruned nothing; no temporary file and no part of ckpt-2 is left.
    CHECK(files_in(dir.path) == std::vector<std::string>{"checkpoint", "ckpt-1.safetensors"});
  }
  SECTION("SIGXFSZ at its default action: killed mid-write") {
    const ChildEnd end = in_child([&] {
      std::signal(SIGXFSZ, SIG_DFL);
      limit_file_size(limit);
      save_next();
    });
    INFO(end.message);
    REQUIRE(WIFSIGNALED(end.status));
    CHECK(WTERMSIG(end.status) == SIGXFSZ);
    // Only the killed save's temporary file, cut at the limit, is new.
    const std::vector<std::string> files = files_in(dir.path);
    REQUIRE(files.size() == 3);
    CHECK(files[0] == "checkpoint");
    CHECK(files[1] == "ckpt-1.safetensors");
    CHECK(files[2].starts_with("ckpt-2.safetensors.tmp."));
    CHECK(fs::file_size(dir.path / files[2]) == limit);
  }
  saved.require_intact();
  // Without the limit the same save goes through.
  CHECK(manager.save(m.graph) == second);
  CHECK(manager.latest() == second);
  CHECK_FALSE(fs::exists(first));
}

TEST_CASE("a save into a full filesystem leaves the previous checkpoint", "[io][full_disk]") {
  SmallTmpfs disk(1024 * 1024);
  if (!disk.mounted()) {
    WARN("skipped: cannot mount a tmpfs (" << disk.error() << "); run as root to test a full disk");
    return;
  }
  const std::string dir = disk / "model";
  Model m(2);
  m.step();
  vkt::CheckpointManager manager(dir, 1);
  const std::string first = manager.save(m.graph);
  const Saved saved = Saved::of(dir, first, m.graph);
  m.step();
  const std::size_t next = checkpoint_bytes(m.graph).size();
  const std::string second = dir + "/ckpt-2.safetensors";

  SECTION("ENOSPC at the checkpoint's write") {
    disk.fill_leaving(next / 2);
    const std::string message = write_error_of([&] { manager.save(m.graph); });
    CHECK_THAT(message, Contains("cannot write '" + second +
                                 "': write failed: No space left on device; free space on its "
                                 "filesystem"));
    CHECK_THAT(message, Contains("the previous checkpoint '" + first +
                                 "' is intact and the index still names it"));
  }
  SECTION("ENOSPC at the index's write, after the checkpoint was written") {
    disk.fill_leaving(next);  // the checkpoint's blocks exactly: none for the index
    const std::string message = write_error_of([&] { manager.save(m.graph); });
    CHECK_THAT(message, Contains("cannot write '" + dir +
                                 "/checkpoint': write failed: No space left on device"));
    CHECK_THAT(message, Contains("the new checkpoint '" + second + "' was removed again"));
    CHECK_THAT(message, Contains("the previous checkpoint '" + first + "' is intact"));
  }
  // keep_max 1 would have deleted ckpt-1 had the index named ckpt-2.
  CHECK(files_in(dir) == std::vector<std::string>{"checkpoint", "ckpt-1.safetensors"});
  saved.require_intact();
  // Space freed, the next save goes through and prunes as usual.
  disk.unfill();
  CHECK(manager.save(m.graph) == second);
  CHECK(files_in(dir) == std::vector<std::string>{"checkpoint", "ckpt-2.safetensors"});
}

TEST_CASE("a save that fails for another reason than the file keeps its error's type",
          "[io][full_disk]") {
  struct NotTheFile : vkt::Error {
    using vkt::Error::Error;
  };
  TempDir dir;
  vkt::CheckpointManager manager(dir.path.string(), 1);
  // What a lost device during a save looks like to the manager: the Estimator
  // must see the DeviceLost itself to recover, not a failed write.
  CHECK_THROWS_MATCHES(
      manager.save(7, [](const std::string&) { throw NotTheFile("the device was lost"); }),
      NotTheFile, Catch::Matchers::Message("the device was lost"));
  CHECK(fs::is_empty(dir.path));
}

namespace {

vkt::EstimatorSpec mlp(vkt::ModelContext& ctx, const vkt::TensorDict& f, const vkt::TensorDict& l,
                       vkt::Mode mode, const vkt::Params&) {
  const Tensor h = vkt::layers::dense(f.at("x"), 8, vkt::layers::Activation::Relu, "hidden");
  const Tensor logits = vkt::layers::dense(h, 3, vkt::layers::Activation::None, "out");
  vkt::EstimatorSpec spec{.mode = mode};
  spec.predictions = {{"logits", logits}};
  if (mode == vkt::Mode::Predict) return spec;
  spec.loss = vkt::sparse_softmax_cross_entropy(l.at("y"), logits, ctx.example_weights(),
                                                vkt::Reduction::Mean);
  vkt::TowerOptimizer adam(std::make_unique<vkt::Adam>(0.01f));
  spec.train_op = adam.minimize(spec.loss);
  return spec;
}

// Takes the disk's last free block after a given step, before the next save.
struct FillAfter : vkt::TrainingHook {
  SmallTmpfs& disk;
  std::uint64_t at;
  FillAfter(SmallTmpfs& d, std::uint64_t step) : disk(d), at(step) {}
  void after_step(std::uint64_t global_step, float) override {
    if (global_step == at) disk.fill_leaving(0);
  }
};

}  // namespace

TEST_CASE("Estimator: a save into a full filesystem stops training, naming the intact checkpoint",
          "[io][full_disk][estimator]") {
  SmallTmpfs disk(1024 * 1024);
  if (!disk.mounted()) {
    WARN("skipped: cannot mount a tmpfs (" << disk.error() << "); run as root to test a full disk");
    return;
  }
  constexpr std::int64_t kRows = 16;
  const std::vector<float> x = vkt::test::random_floats(kRows * 3, 4, -2.0f, 2.0f);
  std::vector<std::int32_t> y(kRows);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<std::int32_t>(i % 3);
  const vkt::Dataset data(
      {{"x", vkt::HostTensor::floats({kRows, 3}, x)}, {"y", vkt::HostTensor::ints({kRows}, y)}});
  const vkt::InputFn input =
      vkt::dataset_input(data, {.batch_size = 4, .epochs = 0, .drop_remainder = true});
  const vkt::ModelFn model = vkt::replicate_model_fn(mlp, {.devices = {0}});
  const std::string dir = disk / "model";
  const vkt::RunConfig config = {.model_dir = dir,
                                 .random_seed = 5,
                                 .save_checkpoints_steps = 2,
                                 .log_step_count_steps = 0,
                                 .save_summary_steps = 0,
                                 .progress = false,
                                 .plot_loss = false};
  const std::string intact = dir + "/ckpt-2.safetensors";
  {
    vkt::Estimator estimator(model, config);
    const std::string message = write_error_of([&] {
      estimator.train(input, {.steps = 6, .hooks = {std::make_shared<FillAfter>(disk, 3)}});
    });
    CHECK_THAT(message, Contains("training stopped at global step 4"));
    CHECK_THAT(message, Contains("cannot write '" + dir + "/ckpt-4.safetensors'"));
    CHECK_THAT(message, Contains("No space left on device"));
    CHECK_THAT(message, Contains("resumes from the last intact checkpoint '" + intact + "'"));
    CHECK(estimator.latest_checkpoint() == intact);
  }
  disk.unfill();
  vkt::Estimator again(model, config);
  CHECK(again.latest_checkpoint() == intact);
  CHECK(again.global_step() == 2);
  CHECK(again.train(input, {.steps = 2}) == 4);
  CHECK(again.resumed());
  CHECK(again.latest_checkpoint() == dir + "/ckpt-4.safetensors");
}

TEST_CASE("metrics.csv on a full filesystem: one warning, and the log goes on without the rows",
          "[io][full_disk]") {
  SmallTmpfs disk(256 * 1024);
  if (!disk.mounted()) {
    WARN("skipped: cannot mount a tmpfs (" << disk.error() << "); run as root to test a full disk");
    return;
  }
  const std::string dir = disk / "model";
  fs::create_directory(dir);
  vkt::TrainingLog log(dir, /*progress=*/false, /*plot=*/false);
  log.evaluated(1, {{"loss", 0.5}});
  REQUIRE(fs::file_size(dir + "/metrics.csv") > 0);
  const auto before = fs::file_size(dir + "/metrics.csv");

  std::vector<std::string> lines;
  {
    const vkt::test::LogCapture warnings(spdlog::level::warn);
    disk.fill_leaving(0);
    // Rows that no longer fit (a few hundred bytes past a full page) are
    // dropped, said once, and nothing throws.
    for (std::uint64_t step = 2; step < 200; ++step) {
      CHECK_NOTHROW(log.evaluated(step, {{"loss", 0.25}, {"accuracy", 0.75}}));
    }
    lines = warnings.lines();
  }
  REQUIRE(lines.size() == 1);
  CHECK_THAT(lines[0], Contains("metrics.csv: writing '" + dir + "/metrics.csv' failed") &&
                           Contains("is the disk full?"));
  disk.unfill();
  // With room again, rows are written again.
  log.evaluated(200, {{"loss", 0.125}});
  CHECK(fs::file_size(dir + "/metrics.csv") > before);
}
