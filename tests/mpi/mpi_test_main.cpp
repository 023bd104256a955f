// Catch2 main for vkt-mpi-tests, run under mpirun: joins the MPI world before
// any test, so every TEST_CASE runs on every rank (each case is collective).
// A failure on any rank makes that rank, and so mpirun, exit non-zero.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <vktower/runtime/vulkan/instance.h>

#include <vktower/runtime/mpi/process_group.h>

#include "../shared_device.h"
#include "../tower_devices_listener.h"

int main(int argc, char* argv[]) {
  ::setenv("VKT_CACHE_DIR", "off", 1);  // tests never touch the user's cache directory
  vkt::ProcessGroup& world = vkt::mpi_world();
  // A rank whose REQUIRE failed skips the rest of its case: the others stop at
  // this deadline rather than wait for it until ctest's timeout.
  world.set_timeout(std::chrono::seconds(60));
  vkt::test::keep_driver_loaded();  // the driver loaded once per rank (shared_device.h)
  const int failed = Catch::Session().run(argc, argv);
  vkt::test::release_tower_devices();
  vkt::test::release_shared_device();  // so that leaks it reports are counted
  // The validation gate, as vkt-tests has it: any message fails the rank.
  const std::uint64_t messages = vkt::Instance::process_validation_messages();
  std::fprintf(stderr, "rank %d: validation layer: %s, validation messages: %llu\n", world.rank(),
               vkt::InstanceOptions::from_environment().validation ? "on" : "OFF",
               static_cast<unsigned long long>(messages));
  return messages > 0 ? 1 : failed;
}
