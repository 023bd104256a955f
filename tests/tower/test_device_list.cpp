#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <cstdlib>

#include <vktower/runtime/vulkan/instance.h>
#include <vktower/tower/device_choice.h>
#include <vktower/tower/device_list.h>

#include "../env_scope.h"
#include "../test_support.h"

using Catch::Matchers::Contains;

TEST_CASE("device lists: all, repeated indices, and clear errors") {
  vkt::Instance instance;
  const auto count = static_cast<std::uint32_t>(instance.devices().size());
  REQUIRE(count >= 1);
  CHECK(vkt::parse_device_list("all", instance) ==
        vkt::choose_default_devices(instance.devices()).devices);
  CHECK(vkt::parse_device_list("0,0, 0", instance) == std::vector<std::uint32_t>{0, 0, 0});
  CHECK(vkt::parse_device_list(" 0 ", instance) == std::vector<std::uint32_t>{0});

  const std::string unknown = vkt::test::error_of([&] { vkt::parse_device_list("0,7", instance); });
  CHECK_THAT(unknown, Contains("device list '0,7': device 7 does not exist"));
  CHECK_THAT(unknown, Contains(instance.devices()[0].name));
  CHECK_THAT(vkt::test::error_of([&] { vkt::parse_device_list("0,,1", instance); }),
             Contains("'' is not a device index"));
  CHECK_THAT(vkt::test::error_of([&] { vkt::parse_device_list("gpu0", instance); }),
             Contains("'gpu0' is not a device index"));
  CHECK_THAT(vkt::test::error_of([&] { vkt::parse_device_list("-1", instance); }),
             Contains("'-1' is not a device index"));
}

TEST_CASE("an empty or blank device list is refused") {
  vkt::Instance instance;
  for (const char* spec : {"", " ", "\t"}) {
    const std::string message =
        vkt::test::error_of([&] { vkt::parse_device_list(spec, instance); });
    CHECK_THAT(message, Contains(fmt::format("device list '{}' names no device", spec)));
    CHECK_THAT(message, Contains("write all, gpu, cpu or indices like 0,0,1"));
  }
  const vkt::test::EnvScope devices("VKT_DEVICES", "");
  CHECK_THAT(vkt::test::error_of([&] { vkt::device_list_from_environment(instance); }),
             Contains("VKT_DEVICES: device list '' names no device"));
}

TEST_CASE("VKT_DEVICES overrides the default device list") {
  vkt::Instance instance;
  const vkt::test::EnvScope devices("VKT_DEVICES", nullptr);
  CHECK(vkt::device_list_from_environment(instance, {0, 0}) == std::vector<std::uint32_t>{0, 0});
  devices.set("0,0,0");
  CHECK(vkt::device_list_from_environment(instance, {0, 0}) == std::vector<std::uint32_t>{0, 0, 0});
  devices.set("9");
  CHECK_THAT(vkt::test::error_of([&] { vkt::device_list_from_environment(instance); }),
             Contains("VKT_DEVICES: device list '9': device 9 does not exist"));
  devices.set(nullptr);
  CHECK_THAT(vkt::test::error_of([&] { vkt::device_list_from_environment(instance, {5}); }),
             Contains("device index 5 does not exist"));
}
