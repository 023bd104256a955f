// A training process killed with SIGKILL at random moments and started again
// ends with the same checkpoint, bit for bit, as one that ran straight through
// (tests/resume_child.cpp: two towers, dropout, a checkpoint every step).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>

#include "../test_support.h"

extern char** environ;

using vkt::test::TempDir;
namespace fs = std::filesystem;

namespace {

constexpr const char* kSteps = "40";

/// Starts the child on `model_dir`, its output appended to `log`.
pid_t start_child(const std::string& model_dir, const std::string& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::string program = vkt::test::sibling_program(VKT_RESUME_CHILD).string();
  std::string dir = model_dir, steps = kSteps;
  char* argv[] = {program.data(), dir.data(), steps.data(), nullptr};
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, program.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  REQUIRE(rc == 0);
  return pid;
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

}  // namespace

TEST_CASE(
    "a training process with dropout killed with SIGKILL at random moments resumes to the same "
    "checkpoint bits as an uninterrupted run",
    "[estimator][resume][dropout][process]") {
  TempDir straight, killed;
  const std::string log = killed / "child.log";
  // The uninterrupted run also measures how long training goes on after the
  // first checkpoint, up to the last one: the kills land within that window.
  // (Not up to the process's exit: on a GPU the 40 steps took less than the
  // teardown, so kills landed after the last checkpoint and nothing resumed.)
  const pid_t first = start_child(straight.path.string(), log);
  const auto first_checkpoint = wait_for_checkpoint(straight.path);
  const auto last_checkpoint =
      wait_for_checkpoint(straight.path, std::string("ckpt-") + kSteps + ".safetensors");
  REQUIRE(wait_child(first) == 0);
  const auto window =
      std::chrono::duration_cast<std::chrono::milliseconds>(last_checkpoint - first_checkpoint);
  const std::string expected =
      vkt::test::read_file(straight / (std::string("ckpt-") + kSteps + ".safetensors"));
  REQUIRE(expected.size() > 1000);

  std::random_device device;
  std::mt19937 random(device());
  const fs::path model = killed.path / "model";
  for (int round = 0; round < 2; ++round) {
    const pid_t pid = start_child(model.string(), log);
    wait_for_checkpoint(model);  // from the last round, or this one's first
    // A random moment in the first half (round 0) or quarter (round 1) of what
    // is left of the window, so the kill lands before the run ends.
    const auto most = static_cast<int>(window.count() / (round == 0 ? 2 : 4));
    const int delay_ms = std::uniform_int_distribution<int>(0, std::max(most, 1))(random);
    INFO("round " << round << ": killed " << delay_ms << " ms after a checkpoint existed (window "
                  << window.count() << " ms)");
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    kill(pid, SIGKILL);
    const int status = wait_child(pid);
    INFO("child status " << status << "; log:\n" << vkt::test::read_file(log));
    CHECK(status == -SIGKILL);  // else it finished first
  }
  REQUIRE(wait_child(start_child(model.string(), log)) == 0);
  const std::string output = vkt::test::read_file(log);
  INFO(output);
  CHECK(output.find("resuming from") != std::string::npos);
  const bool same =
      vkt::test::read_file((model / (std::string("ckpt-") + kSteps + ".safetensors")).string()) ==
      expected;
  CHECK(same);  // a boolean: Catch would print the files' bytes
}
