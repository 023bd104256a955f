// Catch2 main with the validation gate: a test run under VKT_VALIDATION=1 fails
// when any Vulkan validation message of severity warning or error was seen.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include <vktower/runtime/vulkan/instance.h>

int main(int argc, char* argv[]) {
  const int failed = Catch::Session().run(argc, argv);
  const bool validation = vkt::InstanceOptions::from_environment().validation;
  const std::uint64_t messages = vkt::Instance::process_validation_messages();
  std::printf("validation layer: %s, validation messages: %llu\n", validation ? "on" : "OFF",
              static_cast<unsigned long long>(messages));
  if (messages > 0) {
    std::printf("FAILED: the Vulkan validation layer reported %llu message(s); see the log above\n",
                static_cast<unsigned long long>(messages));
    return 1;
  }
  return failed;
}
