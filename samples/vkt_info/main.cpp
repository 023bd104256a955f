// vkt-info: lists every Vulkan device with what a compute user needs to know,
// and runs a saxpy self-test on each. Exits non-zero when there is no device or
// a self-test fails.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <vktower/tower/device_choice.h>
#include <vktower/vktower.h>
#include <cstdio>
#include <optional>

#include "../sample_errors.h"
#include "../sample_flags.h"
#include "self_test.h"

namespace {

std::string size_string(std::uint64_t bytes) {
  if (bytes >= (std::uint64_t{1} << 30)) return fmt::format("{:.1f} GiB", bytes / 1073741824.0);
  if (bytes >= (std::uint64_t{1} << 20)) return fmt::format("{:.1f} MiB", bytes / 1048576.0);
  return fmt::format("{} KiB", bytes / 1024);
}

void print_device(const vkt::DeviceInfo& d) {
  fmt::print("[{}] {}\n", d.index, d.name);
  fmt::print("    {:<15}{}\n", "type", vkt::to_string(d.type));
  fmt::print("    {:<15}{} (0x{:04x}), device 0x{:04x}\n", "vendor", d.vendor, d.vendor_id,
             d.device_id);
  fmt::print("    {:<15}{}{}{}, version {}\n", "driver",
             d.driver_name.empty() ? "?" : d.driver_name, d.driver_info.empty() ? "" : ": ",
             d.driver_info, d.driver_version);
  fmt::print("    {:<15}{}\n", "Vulkan", d.api_version);
  fmt::print("    {:<15}device-local {}, host-visible {}{}\n", "memory",
             size_string(d.device_local_bytes), size_string(d.host_visible_bytes),
             d.unified_memory ? " (unified: buffers are mapped, copies skip staging)" : "");
  fmt::print("    {:<15}max {}x{}x{}, {} invocations, {} shared memory\n", "workgroups",
             d.max_workgroup_size[0], d.max_workgroup_size[1], d.max_workgroup_size[2],
             d.max_workgroup_invocations, size_string(d.max_shared_memory_bytes));
  fmt::print("    {:<15}size {}, compute operations {}\n", "subgroups", d.subgroup_size,
             d.subgroup_compute_ops ? "yes" : "no");
  if (d.timestamps) {
    fmt::print("    {:<15}yes ({} ns per tick)\n", "timestamps", d.timestamp_period_ns);
  } else {
    fmt::print("    {:<15}no\n", "timestamps");
  }
  fmt::print("    {:<15}{}\n", "16-bit storage",
             d.storage_16bit ? "yes" : "no (no f16 or bf16 kernels)");
  std::string units;
  for (const vkt::CooperativeShape& u : d.cooperative_f16) {
    units += fmt::format("{}{}x{}x{}", units.empty() ? "" : ", ", u.m, u.n, u.k);
  }
  fmt::print("    {:<15}{}\n", "tensor cores",
             units.empty() ? "none" : "f16 x f16 -> f32 cooperative matrices " + units);
  fmt::print("    {:<15}{}\n", "transfer queue",
             d.dedicated_transfer_queue ? "dedicated" : "none (copies run on the compute queue)");
  fmt::print("    {:<15}{}\n", "max buffer", size_string(d.max_allocation_bytes));
}

/// Lists every device and self-tests each; the exit code: 1 when there is
/// none or a self-test failed.
int list_devices(std::uint32_t elements, bool self_test, const char* install_hint) {
  vkt::Instance instance;
  const auto& devices = instance.devices();
  if (devices.empty()) {
    fmt::print(stderr, "vkt-info: no Vulkan device found\n{}\n", install_hint);
    return 1;
  }
  fmt::print("vktower {} found {} Vulkan device{}{}\n\n", vkt::version(), devices.size(),
             devices.size() == 1 ? "" : "s",
             instance.validation_enabled() ? " (validation layer on)" : "");
  // Which devices a run with no devices given (--devices all, VKT_DEVICES unset) takes.
  const vkt::DeviceChoice choice = vkt::choose_default_devices(devices);
  int failures = 0;
  for (const vkt::DeviceInfo& info : devices) {
    print_device(info);
    const vkt::DeviceVerdict& verdict = choice.verdicts[info.index];
    fmt::print("    {:<15}{} ({})\n", "default run", verdict.used ? "yes" : "no", verdict.reason);
    if (!info.unusable_reason.empty()) {
      fmt::print("    {:<15}unusable: it {}\n", "self-test", info.unusable_reason);
      ++failures;
    } else if (self_test) {
      vkt::Device device(instance, info.index);
      const SelfTestResult r = run_self_test(device, elements);
      if (!r.error.empty()) {
        fmt::print("    {:<15}saxpy on {} floats: FAIL ({})\n", "self-test", elements, r.error);
      } else {
        fmt::print(
            "    {:<15}saxpy on {} floats: {} ({} wrong, max relative error {:.2g}, "
            "{:.2f} ms)\n",
            "self-test", elements, r.passed ? "PASS" : "FAIL", r.wrong, r.max_error, r.device_ms);
      }
      failures += r.passed ? 0 : 1;
    }
    fmt::print("\n");
  }
  if (instance.validation_enabled()) {
    fmt::print("validation messages: {}\n",
               instance.validation_errors() + instance.validation_warnings());
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"vkt-info: list every Vulkan device and self-test each one with a saxpy kernel"};
  std::uint32_t elements = 1u << 20;
  bool self_test = true;
  app.add_option("--elements", elements, "floats in the saxpy self-test")
      ->capture_default_str()
      ->check(whole_number(1, 1u << 28));
  app.add_flag("!--no-self-test", self_test, "only list the devices");
  if (const std::optional<int> exit = parse_flags(app, argc, argv, "vkt-info")) return *exit;

  const char* install_hint =
      "Install a Vulkan driver: `apt-get install mesa-vulkan-drivers` gives lavapipe, a CPU "
      "device that needs no GPU; for a GPU install its vendor's Vulkan driver.";
  return run_sample(
      "vkt-info", [&] { return list_devices(elements, self_test, install_hint); }, install_hint);
}
