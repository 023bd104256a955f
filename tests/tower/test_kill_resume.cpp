// A training process killed with SIGKILL at random moments and started again
// ends with the same checkpoint, bit for bit, as one that ran straight through
// (tests/resume_child.cpp: two towers, dropout, a checkpoint every step); a
// sample sent SIGINT or SIGTERM saves where it stopped and ends by the signal.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "../test_support.h"

extern char** environ;

using vkt::test::TempDir;
namespace fs = std::filesystem;

namespace {

constexpr const char* kSteps = "40";

/// Starts `args` (the program first) with `env` added to the environment,
/// its output appended to `log`.
pid_t spawn(std::vector<std::string> args, const std::string& log,
            std::vector<std::string> env = {}) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0].c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  REQUIRE(rc == 0);
  return pid;
}

/// Starts the child on `model_dir`, its output appended to `log`.
pid_t start_child(const std::string& model_dir, const std::string& log) {
  return spawn({vkt::test::sibling_program(VKT_RESUME_CHILD).string(), model_dir, kSteps}, log);
}

/// The child's exit status, or -signal when a signal ended it.
int wait_child(pid_t pid) {
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  if (WIFSIGNALED(status)) return -WTERMSIG(status);
  return WEXITSTATUS(status);
}

/// When `file` in the model directory first exists (at most 60 s on): by
/// default its checkpoint index, there from the first checkpoint on.
std::chrono::steady_clock::time_point wait_for_checkpoint(const fs::path& model_dir,
                                                          const std::string& file = "checkpoint") {
  const auto start = std::chrono::steady_clock::now();
  while (!fs::exists(model_dir / file) &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(60)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return std::chrono::steady_clock::now();
}

/// The newest checkpoint step in `model_dir` (0 when there is none), from the
/// file names: the child keeps its 3 newest, so one is always there.
std::uint64_t newest_step(const fs::path& model_dir) {
  std::uint64_t newest = 0;
  std::error_code ec;  // files come and go while the child runs
  for (fs::directory_iterator it(model_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with("ckpt-") && name.ends_with(".safetensors")) {
      newest = std::max<std::uint64_t>(newest, std::strtoull(name.c_str() + 5, nullptr, 10));
    }
  }
  return newest;
}

/// Waits (at most 60 s) until the child has saved the checkpoint of `step` or a later one.
void wait_for_step(const fs::path& model_dir, std::uint64_t step) {
  const auto start = std::chrono::steady_clock::now();
  while (newest_step(model_dir) < step &&
         std::chrono::steady_clock::now() - start < std::chrono::seconds(60)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace

TEST_CASE(
    "a training process with dropout killed with SIGKILL at random moments resumes to the same "
    "checkpoint bits as an uninterrupted run",
    "[estimator][resume][dropout][process]") {
  TempDir straight, killed;
  const std::string log = killed / "child.log";
  // The uninterrupted run also measures a step's time (with its checkpoint),
  // from the first checkpoint to the last.
  const pid_t first = start_child(straight.path.string(), log);
  const auto first_checkpoint = wait_for_checkpoint(straight.path);
  const auto last_checkpoint =
      wait_for_checkpoint(straight.path, std::string("ckpt-") + kSteps + ".safetensors");
  REQUIRE(wait_child(first) == 0);
  const std::uint64_t steps = std::stoull(kSteps);
  const auto step_ms =
      std::max<long>(1, static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                              last_checkpoint - first_checkpoint)
                                              .count()) /
                            static_cast<long>(steps - 1));
  const std::string expected =
      vkt::test::read_file(straight / (std::string("ckpt-") + kSteps + ".safetensors"));
  REQUIRE(expected.size() > 1000);

  std::random_device device;
  std::mt19937 random(device());
  const fs::path model = killed.path / "model";
  // Every child's log (each child writes its own over the last): round 1's
  // child resumes from round 0's checkpoints, and the last child from round 1's.
  std::string logs;
  std::uint64_t resumed_at = 0;
  for (int round = 0; round < 2; ++round) {
    const pid_t pid = start_child(model.string(), log);
    // Each kill is anchored to a checkpoint step, not to a time measured in
    // another run (a cold shader cache or a neighbour's load changed the
    // machine's speed between runs, and kills landed after the run had ended):
    // a random step well before the end, then a random moment within the next
    // two steps, which lands anywhere in a step or its save.
    const std::uint64_t anchor = std::uniform_int_distribution<std::uint64_t>(
        resumed_at + 1, std::max(resumed_at + 1, round == 0 ? steps / 2 : steps - 8))(random);
    const auto delay_ms = std::uniform_int_distribution<long>(0, 2 * step_ms)(random);
    INFO("round " << round << ": killed " << delay_ms << " ms after the checkpoint of step "
                  << anchor << " (a step took " << step_ms << " ms)");
    wait_for_step(model, anchor);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    kill(pid, SIGKILL);
    const int status = wait_child(pid);
    resumed_at = newest_step(model);
    logs += vkt::test::read_file(log);
    INFO("child status " << status << "; log:\n" << vkt::test::read_file(log));
    CHECK(status == -SIGKILL);
    REQUIRE(resumed_at < steps);
  }
  REQUIRE(wait_child(start_child(model.string(), log)) == 0);
  logs += vkt::test::read_file(log);
  INFO(logs);
  CHECK(logs.find("resuming from") != std::string::npos);
  const bool same =
      vkt::test::read_file((model / (std::string("ckpt-") + kSteps + ".safetensors")).string()) ==
      expected;
  CHECK(same);  // a boolean: Catch would print the files' bytes
}

#ifdef VKT_DIGITS_PROGRAM
namespace {

/// The global steps of metrics.csv's training loss rows, in file order.
std::vector<std::uint64_t> loss_steps(const fs::path& metrics) {
  std::vector<std::uint64_t> steps;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    if (line.find(",train,loss,") != std::string::npos) steps.push_back(std::stoull(line));
  }
  return steps;
}

/// Waits (at most 60 s) until metrics.csv holds a training loss row past `step`.
void wait_for_loss_past(const fs::path& model_dir, std::uint64_t step) {
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const std::vector<std::uint64_t> steps = loss_steps(model_dir / "metrics.csv");
    if ((!steps.empty() && steps.back() > step) ||
        std::chrono::steady_clock::now() - start > std::chrono::seconds(60)) {
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

TEST_CASE(
    "a sample sent SIGINT or SIGTERM mid-training saves a checkpoint where it stopped, says so, "
    "ends by the signal, and resumes with metrics.csv in step order",
    "[estimator][resume][process]") {
  const std::string digits = vkt::test::sibling_program(VKT_DIGITS_PROGRAM).string();
  for (const int signal : {SIGINT, SIGTERM, SIGKILL}) {
    INFO("signal " << signal);
    TempDir dir;
    const fs::path model = dir.path / "model";
    const std::string log = dir / "run.log";
    const pid_t pid =
        spawn({digits, "--devices", "0", "--steps", "100000", "--model-dir", model.string()}, log);
    // Past the first checkpoint (every 100 steps): a killed run has logged
    // steps its resumed run trains again.
    wait_for_loss_past(model, 100);
    kill(pid, signal);
    REQUIRE(wait_child(pid) == -signal);  // a shell reports 128 + signal
    const std::string output = vkt::test::read_file(log);
    INFO(output);
    CHECK(output.find('\r') == std::string::npos);  // not a terminal: no redrawn bar
    if (signal != SIGKILL) {
      const std::string said = std::string("stopped by ") +
                               (signal == SIGINT ? "Ctrl-C (SIGINT)" : "SIGTERM") +
                               " at global step ";
      const std::size_t at = output.find(said);
      REQUIRE(at != std::string::npos);
      const std::uint64_t step = std::stoull(output.substr(at + said.size()));
      const std::string checkpoint = (model / fmt::format("ckpt-{}.safetensors", step)).string();
      CHECK(output.find(fmt::format(
                "at global step {}: saved {}; train again with the same model directory to "
                "resume\n",
                step, checkpoint)) != std::string::npos);
      CHECK(fs::exists(checkpoint));
      CHECK(loss_steps(model / "metrics.csv").back() == step);  // its last loss, logged
    }
    // The run resumed: every loss row once, in step order, whatever the
    // killed run logged past its last checkpoint.
    REQUIRE(wait_child(spawn(
                {digits, "--devices", "0", "--steps", "3", "--model-dir", model.string()}, log)) ==
            0);
    const std::vector<std::uint64_t> steps = loss_steps(model / "metrics.csv");
    REQUIRE(steps.size() >= 2);
    CHECK(std::adjacent_find(steps.begin(), steps.end(), std::greater_equal<>()) == steps.end());
  }
  // Without --model-dir the temporary directory goes with the stopped run.
  TempDir temp;
  const std::string log = temp / "run.log";
  const fs::path tmpdir = temp.path / "tmp";
  fs::create_directories(tmpdir);
  const pid_t pid =
      spawn({digits, "--devices", "0", "--steps", "100000"}, log, {"TMPDIR=" + tmpdir.string()});
  const auto start = std::chrono::steady_clock::now();
  std::vector<fs::path> dirs;
  while (dirs.empty() && std::chrono::steady_clock::now() - start < std::chrono::seconds(60)) {
    for (const auto& e : fs::directory_iterator(tmpdir)) {
      if (fs::exists(e.path() / "metrics.csv")) dirs.push_back(e.path());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  REQUIRE(dirs.size() == 1);
  wait_for_loss_past(dirs[0], 0);
  kill(pid, SIGINT);
  REQUIRE(wait_child(pid) == -SIGINT);
  INFO(vkt::test::read_file(log));
  CHECK(vkt::test::read_file(log).find("the model directory was temporary and is removed") !=
        std::string::npos);
  CHECK(fs::is_empty(tmpdir));
}
#endif
