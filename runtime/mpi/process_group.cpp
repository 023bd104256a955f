// What the process group needs with or without MPI: the timeout, the launch
// check, and (built without MPI) an mpi_world() that says how to get MPI.
#include "process_group.h"

#include <fmt/format.h>

#include <cstdlib>

#include "../vulkan/error.h"

namespace vkt {

void ProcessGroup::set_timeout(std::chrono::milliseconds timeout) {
  if (timeout < std::chrono::milliseconds(1)) {
    throw Error(fmt::format(
        "process group timeout of {} ms: a collective needs at least 1 ms to wait for its peers",
        timeout.count()));
  }
  timeout_ = timeout;
}

bool launched_by_mpirun() {
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  return size != nullptr && *size != '\0';
}

bool mpi_available() {
  return VKT_WITH_MPI != 0;
}

#if !VKT_WITH_MPI
ProcessGroup& mpi_world() {
  throw Error(
      "this vktower was built without MPI, so it cannot join an MPI job: install Open MPI "
      "(apt-get install libopenmpi-dev openmpi-bin) and rebuild vktower with -DVKT_WITH_MPI=ON");
}
#endif

}  // namespace vkt
