// vkt-mpi-fault MODE TIMEOUT_MS: a job in which rank 1 misbehaves at step 1,
// for the fault tests in tests/mpi/CMakeLists.txt. A rank prints every
// vkt::Error it gets ("rank 0: ...") and exits 1; the job must then end.
//   hang      every rank but 0 sleeps instead of joining step 1's allreduce
//   kill      rank 1 kills itself (SIGKILL) instead of joining it
//   mismatch  rank 1 expects 16 bytes of step 1's broadcast; rank 0 sends 8
//   pause     no fault: rank 1 (timeout TIMEOUT_MS; rank 0's is 30 s) enters
//             step 1's allreduce, where rank 0 stops it (SIGSTOP) for
//             TIMEOUT_MS + 1.5 s, longer than its timeout, then continues it
//             (SIGCONT) and joins.
//             The time rank 1 did not run is not rank 0's fault: both ranks
//             must end step 1 with the right sum, and the job exit 0.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <signal.h>
#include <unistd.h>

#include <vktower/runtime/mpi/process_group.h>
#include <vktower/runtime/vulkan/error.h>

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: vkt-mpi-fault hang|kill|mismatch|pause TIMEOUT_MS (under mpirun -np 2; "
               "hang: -np 2 or more)\n");
  return 2;
}

// Step 1 of `pause`: rank 0 stops rank 1 while rank 1 waits in the allreduce
// for rank 0, for longer than rank 1's timeout; then both end it.
void paused_step(vkt::ProcessGroup& world, std::vector<float>& gradients, std::string_view what,
                 std::chrono::milliseconds timeout) {
  const std::vector<std::string> pids = world.allgather(std::to_string(::getpid()), "pids");
  if (world.rank() == 1) {
    world.set_timeout(timeout);
  } else {
    const pid_t peer = static_cast<pid_t>(std::stol(pids[1]));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // rank 1 is in its wait
    if (::kill(peer, SIGSTOP) != 0) throw vkt::Error("SIGSTOP to rank 1 failed");
    std::this_thread::sleep_for(timeout + std::chrono::milliseconds(1500));
    if (::kill(peer, SIGCONT) != 0) throw vkt::Error("SIGCONT to rank 1 failed");
  }
  world.allreduce_sum(gradients, what);
  world.set_timeout(std::chrono::milliseconds(30'000));
  for (float g : gradients) {
    if (g != static_cast<float>(world.size())) {
      throw vkt::Error(std::string(what) + ": the sum is " + std::to_string(g) + ", not " +
                       std::to_string(world.size()));
    }
  }
}

void step(vkt::ProcessGroup& world, int index, std::string_view mode,
          std::chrono::milliseconds timeout) {
  std::vector<float> gradients(1000, 1.0f);
  const std::string what = "step " + std::to_string(index) + ": gradient bucket 0";
  if (index == 1 && mode == "hang" && world.rank() > 0) {
    std::this_thread::sleep_for(std::chrono::minutes(5));
  }
  if (index == 1 && mode == "kill" && world.rank() == 1) std::raise(SIGKILL);
  if (index == 1 && mode == "pause") {
    paused_step(world, gradients, what, timeout);
    return;
  }
  if (index == 1 && mode == "mismatch") {
    std::vector<std::byte> variables(world.rank() == 0 ? 8 : 16);
    world.broadcast(variables, 0, "step 1: variables");
  }
  world.allreduce_sum(gradients, what);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return usage();
  const std::string_view mode = argv[1];
  if (mode != "hang" && mode != "kill" && mode != "mismatch" && mode != "pause") return usage();
  vkt::ProcessGroup& world = vkt::mpi_world();
  if (world.size() < 2 || (mode != "hang" && world.size() != 2)) return usage();
  const std::chrono::milliseconds timeout(std::atoi(argv[2]));
  // pause: rank 1 takes TIMEOUT_MS at step 1 only (a slow start is no fault).
  world.set_timeout(mode == "pause" ? std::chrono::milliseconds(30'000) : timeout);
  int index = 0;
  try {
    for (; index < 3; ++index) step(world, index, mode, timeout);
  } catch (const vkt::Error& e) {
    std::printf("rank %d: %s\n", world.rank(), e.what());
    try {
      step(world, index + 1, mode, timeout);
    } catch (const vkt::Error& again) {
      std::printf("rank %d: then: %s\n", world.rank(), again.what());
    }
    std::fflush(stdout);
    return 1;
  }
  std::printf("rank %d: no fault seen\n", world.rank());
  return 0;
}
