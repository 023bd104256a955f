// vkt-mpi-fault MODE TIMEOUT_MS: a job in which rank 1 misbehaves at step 1,
// for the fault tests in tests/mpi/CMakeLists.txt. A rank prints every
// vkt::Error it gets ("rank 0: ...") and exits 1; the job must then end.
//   hang      every rank but 0 sleeps instead of joining step 1's allreduce
//   kill      rank 1 kills itself (SIGKILL) instead of joining it
//   mismatch  rank 1 expects 16 bytes of step 1's broadcast; rank 0 sends 8
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <vktower/runtime/mpi/process_group.h>
#include <vktower/runtime/vulkan/error.h>

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: vkt-mpi-fault hang|kill|mismatch TIMEOUT_MS (under mpirun -np 2; hang: "
               "-np 2 or more)\n");
  return 2;
}

void step(vkt::ProcessGroup& world, int index, std::string_view mode) {
  std::vector<float> gradients(1000, 1.0f);
  const std::string what = "step " + std::to_string(index) + ": gradient bucket 0";
  if (index == 1 && mode == "hang" && world.rank() > 0) {
    std::this_thread::sleep_for(std::chrono::minutes(5));
  }
  if (index == 1 && mode == "kill" && world.rank() == 1) std::raise(SIGKILL);
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
  if (mode != "hang" && mode != "kill" && mode != "mismatch") return usage();
  vkt::ProcessGroup& world = vkt::mpi_world();
  if (world.size() < 2 || (mode != "hang" && world.size() != 2)) return usage();
  world.set_timeout(std::chrono::milliseconds(std::atoi(argv[2])));
  int index = 0;
  try {
    for (; index < 3; ++index) step(world, index, mode);
  } catch (const vkt::Error& e) {
    std::printf("rank %d: %s\n", world.rank(), e.what());
    try {
      step(world, index + 1, mode);
    } catch (const vkt::Error& again) {
      std::printf("rank %d: then: %s\n", world.rank(), again.what());
    }
    std::fflush(stdout);
    return 1;
  }
  std::printf("rank %d: no fault seen\n", world.rank());
  return 0;
}
