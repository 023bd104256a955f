#include <catch2/catch.hpp>

#include <link.h>

#include <set>
#include <string>

#include <vktower/runtime/vulkan/device.h>
#include <vktower/runtime/vulkan/instance.h>
#include "shared_device.h"
#include "test_support.h"

using Catch::Matchers::Contains;

namespace {

/// The shared objects the process has loaded now, by path.
std::set<std::string> loaded_libraries() {
  std::set<std::string> names;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        static_cast<std::set<std::string>*>(out)->insert(info->dlpi_name);
        return 0;
      },
      &names);
  return names;
}

}  // namespace

TEST_CASE("the test process holds one Instance, so later Instances load and unload no driver") {
  // NVIDIA's driver takes static TLS that is never given back: loaded and
  // unloaded with every Instance, it fails after a few dozen (RELIABILITY.md).
  REQUIRE(vkt::test::shared_slot().instance != nullptr);  // made by main()
  const std::set<std::string> before = loaded_libraries();
  for (int i = 0; i < 3; ++i) {
    const vkt::Instance instance;
    CHECK(loaded_libraries() == before);
  }
  CHECK(loaded_libraries() == before);
}

TEST_CASE("Instance lists at least one usable device with the fields a compute user needs") {
  vkt::Instance instance;
  REQUIRE_FALSE(instance.devices().empty());
  for (const vkt::DeviceInfo& d : instance.devices()) {
    INFO(d.name);
    CHECK(d.index < instance.devices().size());
    CHECK_FALSE(d.name.empty());
    CHECK(d.api_version_raw >= VK_API_VERSION_1_1);
    CHECK(d.device_local_bytes > 0);
    CHECK(d.host_visible_bytes > 0);
    CHECK(d.max_workgroup_invocations >= 128);  // Vulkan's required minimum
    CHECK(d.max_workgroup_size[0] >= 128);
    CHECK(d.max_shared_memory_bytes >= 16384);
    CHECK(d.subgroup_size >= 1);
    CHECK(d.max_allocation_bytes > 0);
  }
}

TEST_CASE("lavapipe is recognised with its measured properties") {
  vkt::Instance instance;
  const vkt::DeviceInfo* lavapipe = nullptr;
  for (const vkt::DeviceInfo& d : instance.devices()) {
    if (d.is_lavapipe) lavapipe = &d;
  }
  if (lavapipe == nullptr) {
    WARN("no lavapipe device on this machine");
    return;
  }
  CHECK(lavapipe->type == vkt::DeviceType::Cpu);
  CHECK(lavapipe->driver_name == "llvmpipe");
  CHECK(lavapipe->unified_memory);  // one memory type, device-local and host-visible
  CHECK(lavapipe->subgroup_size == 8);
  CHECK(lavapipe->max_shared_memory_bytes == 32768);
  CHECK(lavapipe->timeline_semaphores);
  CHECK(lavapipe->unusable_reason.empty());
}

TEST_CASE("validation follows VKT_VALIDATION") {
  vkt::Instance instance;
  // ctest runs this suite with VKT_VALIDATION=1: the layer must really be on.
  CHECK(instance.validation_enabled() == vkt::InstanceOptions::from_environment().validation);
  CHECK(instance.validation_errors() == 0);
  CHECK(instance.validation_warnings() == 0);
}

TEST_CASE("an unknown device index is a vkt::Error that lists the devices") {
  vkt::Instance instance;
  const auto count = static_cast<std::uint32_t>(instance.devices().size());
  const std::string message = vkt::test::error_of([&] { vkt::Device device(instance, count + 3); });
  CHECK_THAT(message, Contains("device index " + std::to_string(count + 3) + " does not exist"));
  CHECK_THAT(message, Contains(instance.devices()[0].name));
  CHECK_THAT(message, Contains("vkt-info"));
  CHECK_THROWS_AS(instance.device(count), vkt::Error);
}

TEST_CASE("several Devices can share one physical device") {
  vkt::Instance instance;
  vkt::Device a(instance, 0);
  vkt::Device b(instance, 0);
  vkt::Device c(instance, 0);
  CHECK(a.vk_device() != b.vk_device());
  CHECK(b.vk_device() != c.vk_device());
  CHECK(a.info().name == c.info().name);
}
