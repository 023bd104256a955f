// mpi_world(): MPI's initialisation on first use, and its end at process exit
// (finalised, or the whole job aborted when a collective failed).
#include <mpi.h>

#include <fmt/format.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "../vulkan/error.h"
#include "detail/mpi_process_group.h"
#include "process_group.h"

namespace vkt {

namespace {

std::atomic<bool> g_job_broken{false};
bool g_we_initialised = false;  // MPI initialised by the application is its to finalise

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE:
      return "MPI_THREAD_MULTIPLE";
    default:
      return "an unknown level";
  }
}

// At exit: a broken job must end everywhere, or a peer still inside a
// collective would wait for this process forever; otherwise finalise.
void end_mpi_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized != 0) return;
  if (g_job_broken) {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (g_we_initialised) MPI_Finalize();
}

detail::MpiProcessGroup* join_world() {
  int initialised = 0;
  MPI_Initialized(&initialised);
  int provided = MPI_THREAD_SINGLE;
  if (initialised == 0) {
    detail::mpi_check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided),
                      "MPI_Init_thread", "joining the MPI world");
    g_we_initialised = true;
    std::atexit(end_mpi_at_exit);
  } else {
    detail::mpi_check(MPI_Query_thread(&provided), "MPI_Query_thread", "joining the MPI world");
    std::atexit(end_mpi_at_exit);  // aborts a broken job; finalises only what it initialised
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    throw Error(fmt::format(
        "joining the MPI world: this MPI provides {} where vktower needs MPI_THREAD_SERIALIZED "
        "(its collectives may run on any thread, one at a time); use an MPI built with thread "
        "support (Open MPI 4.1 has it)",
        thread_level_name(provided)));
  }
  // Never destroyed: MPI_Finalize at exit frees its communicator.
  return new detail::MpiProcessGroup(MPI_COMM_WORLD);
}

}  // namespace

void detail::mark_mpi_job_broken() {
  g_job_broken = true;
}

ProcessGroup& mpi_world() {
  static detail::MpiProcessGroup* const world = join_world();
  return *world;
}

}  // namespace vkt
