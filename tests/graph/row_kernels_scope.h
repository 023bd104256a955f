#pragma once
// Sets how the row kernels take a row for one scope, so a test runs the GPU's
// workgroup-per-row kernels (and the CPU's invocation per row) on lavapipe.

#include <vktower/runtime/vulkan/device.h>

#include "../env_scope.h"
#include "../shared_device.h"

namespace vkt::test {

/// Sets the shared device's row kernels ("workgroup", "invocation" or "auto")
/// for one scope, and VKT_ROW_KERNELS for the Devices made in it (towers), and
/// puts back what was there.
class RowKernelsScope {
 public:
  explicit RowKernelsScope(const char* value)
      : old_(shared_device().options().row_kernels), env_("VKT_ROW_KERNELS", value) {
    shared_device().set_row_kernels(parse_row_kernels(value, "RowKernelsScope"));
  }
  ~RowKernelsScope() { shared_device().set_row_kernels(old_); }
  RowKernelsScope(const RowKernelsScope&) = delete;
  RowKernelsScope& operator=(const RowKernelsScope&) = delete;

 private:
  // Before env_: a shared device this scope makes must see the environment
  // as it was, or the scope's value would be what it puts back.
  RowKernels old_;
  EnvScope env_;
};

}  // namespace vkt::test
