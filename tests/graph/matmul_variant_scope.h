#pragma once
// Sets the matmul kernels for one scope, so a test runs matmul's (and
// conv2d's) texel and tiled kernels on the same device.

#include <vktower/runtime/vulkan/device.h>

#include "../env_scope.h"
#include "../shared_device.h"

namespace vkt::test {

/// Sets the shared device's matmul kernels ("tiled", "texel" or "auto") for one
/// scope, and VKT_MATMUL_VARIANT for the Devices made in it (towers), and puts
/// back what was there.
class VariantScope {
 public:
  explicit VariantScope(const char* value)
      : old_(shared_device().options().matmul), env_("VKT_MATMUL_VARIANT", value) {
    shared_device().set_matmul_kernels(parse_matmul_kernels(value, "VariantScope"));
  }
  ~VariantScope() { shared_device().set_matmul_kernels(old_); }
  VariantScope(const VariantScope&) = delete;
  VariantScope& operator=(const VariantScope&) = delete;

 private:
  // Before env_: a shared device this scope makes must see the environment
  // as it was, or the scope's value would be what it puts back.
  MatmulKernels old_;
  EnvScope env_;
};

}  // namespace vkt::test
