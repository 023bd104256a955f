// Catch2 main with the validation gate: a test run under VKT_VALIDATION=1 fails
// when any Vulkan validation message of severity warning or error was seen.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include <vktower/runtime/vulkan/instance.h>

#include "shared_device.h"
#include "tower_devices_listener.h"

int main(int argc, char* argv[]) {
  // Tests never touch the user's cache directory; towers then keep their
  // pipeline and tuning caches in memory (the [cache] tests use temporary dirs).
  ::setenv("VKT_CACHE_DIR", "off", 1);
  // ctest's discovery lists the tests without running them: no Vulkan then.
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing |= std::string_view(argv[i]).rfind("--list", 0) == 0;
  // The Vulkan driver loaded once for the whole run (see shared_device.h).
  if (!listing) vkt::test::keep_driver_loaded();
  const int failed = Catch::Session().run(argc, argv);
  if (listing) return failed;
  vkt::test::release_tower_devices();
  vkt::test::release_shared_device();  // so that leaks it reports are counted
  const bool validation = vkt::InstanceOptions::from_environment().validation;
  const std::uint64_t messages = vkt::Instance::process_validation_messages();
  // stderr: catch_discover_tests reads stdout of the listing run as test names.
  std::fprintf(stderr, "validation layer: %s, validation messages: %llu\n",
               validation ? "on" : "OFF", static_cast<unsigned long long>(messages));
  if (messages > 0) {
    std::fprintf(
        stderr, "FAILED: the Vulkan validation layer reported %llu message(s); see the log above\n",
        static_cast<unsigned long long>(messages));
    return 1;
  }
  return failed;
}
