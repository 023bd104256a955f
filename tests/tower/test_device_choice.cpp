// The default device choice (TensorFlow's replicate_model_fn: every GPU, the CPU
// only when there is no GPU) and the all/gpu/cpu keywords, over made-up device
// lists, then on this machine.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include <vktower/runtime/vulkan/detail/log.h>
#include <vktower/runtime/vulkan/instance.h>
#include <vktower/tower/device_choice.h>
#include <vktower/tower/device_list.h>

#include "../env_scope.h"
#include "../log_capture.h"
#include "../test_support.h"

using Catch::Matchers::Contains;
using Devices = std::vector<vkt::DeviceInfo>;
using Indices = std::vector<std::uint32_t>;

namespace {

/// A machine's device list: one entry per device, in index order.
Devices machine(std::vector<std::pair<vkt::DeviceType, std::string>> devices) {
  Devices out;
  for (auto& [type, name] : devices) {
    vkt::DeviceInfo d;
    d.index = static_cast<std::uint32_t>(out.size());
    d.type = type;
    d.name = name;
    out.push_back(d);
  }
  return out;
}

constexpr auto kDiscrete = vkt::DeviceType::DiscreteGpu;
constexpr auto kIntegrated = vkt::DeviceType::IntegratedGpu;
constexpr auto kCpu = vkt::DeviceType::Cpu;

}  // namespace

TEST_CASE("the default device choice takes every GPU and the CPU only without one") {
  SECTION("GPU + CPU: the GPU only, and vkt-info says why the CPU is left out") {
    const Devices d = machine({{kCpu, "llvmpipe"}, {kDiscrete, "NVIDIA H100"}});
    const vkt::DeviceChoice c = vkt::choose_default_devices(d);
    CHECK(c.devices == Indices{1});
    REQUIRE(c.verdicts.size() == 2);
    CHECK_FALSE(c.verdicts[0].used);
    CHECK_THAT(c.verdicts[0].reason, Contains("a GPU is present") && Contains("--devices cpu"));
    CHECK(c.verdicts[1].used);
    CHECK(c.verdicts[1].reason == "discrete GPU");
  }
  SECTION("CPU only: the CPU device") {
    const vkt::DeviceChoice c = vkt::choose_default_devices(machine({{kCpu, "llvmpipe"}}));
    CHECK(c.devices == Indices{0});
    CHECK(c.verdicts[0].used);
    CHECK_THAT(c.verdicts[0].reason, Contains("no usable GPU"));
  }
  SECTION("two GPUs of different vendors and a CPU: both GPUs") {
    Devices d = machine({{kDiscrete, "AMD"}, {kCpu, "llvmpipe"}, {kDiscrete, "NVIDIA"}});
    d[0].vendor = "AMD";
    d[2].vendor = "NVIDIA";
    CHECK(vkt::choose_default_devices(d).devices == Indices{0, 2});
  }
  SECTION("integrated + discrete: both") {
    const Devices d = machine({{kIntegrated, "Intel"}, {kDiscrete, "NVIDIA"}});
    const vkt::DeviceChoice c = vkt::choose_default_devices(d);
    CHECK(c.devices == Indices{0, 1});
    CHECK(c.verdicts[0].reason == "integrated GPU");
  }
  SECTION("a virtual GPU is a GPU") {
    const Devices d = machine({{vkt::DeviceType::VirtualGpu, "virtio"}, {kCpu, "llvmpipe"}});
    CHECK(vkt::choose_default_devices(d).devices == Indices{0});
  }
  SECTION("an unusable GPU + CPU: the CPU, and the GPU says why not") {
    Devices d = machine({{kDiscrete, "old GPU"}, {kCpu, "llvmpipe"}});
    d[0].unusable_reason = "supports only Vulkan 1.0";
    const vkt::DeviceChoice c = vkt::choose_default_devices(d);
    CHECK(c.devices == Indices{1});
    CHECK_FALSE(c.verdicts[0].used);
    CHECK(c.verdicts[0].reason == "unusable: supports only Vulkan 1.0");
  }
  SECTION("a device of type other only without GPU and CPU devices") {
    CHECK(vkt::choose_default_devices(machine({{vkt::DeviceType::Other, "x"}, {kCpu, "cpu"}}))
              .devices == Indices{1});
    CHECK(vkt::choose_default_devices(machine({{vkt::DeviceType::Other, "x"}})).devices ==
          Indices{0});
  }
  SECTION("nothing usable: no device, and 'all' says so naming the devices") {
    Devices d = machine({{kDiscrete, "old GPU"}});
    d[0].unusable_reason = "has no compute queue";
    CHECK(vkt::choose_default_devices(d).devices.empty());
    const std::string message = vkt::test::error_of([&] { vkt::parse_device_list("all", d); });
    CHECK_THAT(message, Contains("device list 'all': no usable Vulkan device") &&
                            Contains("0: old GPU (discrete GPU, unusable: has no compute queue)"));
    CHECK_THAT(vkt::test::error_of([] { vkt::parse_device_list("all", Devices{}); }),
               Contains("this machine has no Vulkan device"));
  }
}

TEST_CASE("device lists: all, gpu, cpu and indices, with clear errors") {
  Devices d = machine({{kCpu, "llvmpipe"}, {kDiscrete, "NVIDIA"}, {kIntegrated, "Intel"}});
  CHECK(vkt::parse_device_list("all", d) == Indices{1, 2});
  CHECK(vkt::parse_device_list(" gpu ", d) == Indices{1, 2});
  CHECK(vkt::parse_device_list("cpu", d) == Indices{0});
  // An explicit list is honoured as written: a GPU and the CPU device together.
  CHECK(vkt::parse_device_list("1,0,1", d) == Indices{1, 0, 1});

  const std::string bad = vkt::test::error_of([&] { vkt::parse_device_list("GPUs", d); });
  CHECK_THAT(bad, Contains("device list 'GPUs': 'GPUs' is not a device index") &&
                      Contains("write all, gpu, cpu or indices like 0,0,1") &&
                      Contains("0: llvmpipe (CPU); 1: NVIDIA (discrete GPU)"));
  CHECK_THAT(vkt::test::error_of([&] { vkt::parse_device_list("3", d); }),
             Contains("device list '3': device 3 does not exist; this machine has 3 Vulkan "
                      "devices: 0: llvmpipe (CPU)"));
  CHECK_THAT(vkt::test::error_of([&] { vkt::parse_device_list("0,", d); }),
             Contains("'' is not a device index"));
  // Past uint32: from_chars refuses it rather than wrapping to a small index.
  CHECK_THAT(vkt::test::error_of([&] { vkt::parse_device_list("4294967296", d); }),
             Contains("'4294967296' is not a device index"));
  CHECK_THAT(vkt::test::error_of([] { vkt::parse_device_list("0", Devices{}); }),
             Contains("device 0 does not exist; this machine has no Vulkan device"));

  SECTION("gpu on a machine without a usable GPU names the devices present") {
    Devices cpu_only = machine({{kCpu, "llvmpipe"}, {kDiscrete, "old GPU"}});
    cpu_only[1].unusable_reason = "has no compute queue";
    const std::string message =
        vkt::test::error_of([&] { vkt::parse_device_list("gpu", cpu_only); });
    CHECK_THAT(message, Contains("device list 'gpu': no usable GPU device") &&
                            Contains("0: llvmpipe (CPU)") &&
                            Contains("1: old GPU (discrete GPU, unusable: has no compute queue)") &&
                            Contains("write all, cpu or indices"));
  }
  SECTION("cpu on a machine without a CPU device") {
    const std::string message = vkt::test::error_of([] {
      vkt::parse_device_list("cpu", machine({{kDiscrete, "NVIDIA"}}));
    });
    CHECK_THAT(message, Contains("device list 'cpu': no usable CPU device") &&
                            Contains("0: NVIDIA (discrete GPU)") &&
                            Contains("write all, gpu or indices"));
  }
}

TEST_CASE("on this machine the default run takes lavapipe, and VKT_DEVICES says it overrode") {
  vkt::Instance instance;
  const vkt::DeviceChoice choice = vkt::choose_default_devices(instance.devices());
  bool gpu = false;
  for (const vkt::DeviceInfo& d : instance.devices()) {
    gpu = gpu || (vkt::is_gpu(d.type) && d.unusable_reason.empty());
  }
  const vkt::test::EnvScope devices("VKT_DEVICES", nullptr);
  const Indices chosen = vkt::device_list_from_environment(instance);
  CHECK(chosen == choice.devices);
  if (!gpu) {  // the CI machine: lavapipe only
    REQUIRE_FALSE(chosen.empty());
    for (const std::uint32_t i : chosen) CHECK(instance.device(i).is_lavapipe);
    CHECK(vkt::parse_device_list("cpu", instance) == chosen);
  }

  // The override is logged once per process, naming the devices it chose.
  std::vector<std::string> lines;
  {
    const vkt::test::LogCapture log;
    vkt::detail::forget_device_override_log();
    devices.set("0,0");
    CHECK(vkt::device_list_from_environment(instance, {0}) == Indices{0, 0});
    CHECK(vkt::device_list_from_environment(instance) == Indices{0, 0});
    devices.set(nullptr);
    lines = log.lines();
  }
  REQUIRE(lines.size() == 1);
  CHECK_THAT(lines[0], Contains("VKT_DEVICES='0,0' overrides the program's device choice (0)") &&
                           Contains("towers on devices 0,0 (" + instance.device(0).name + ")"));
}
