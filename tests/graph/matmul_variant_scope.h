#pragma once
// Sets VKT_MATMUL_VARIANT for one scope, so a test runs matmul's (and conv2d's)
// texel and tiled kernels on the same device.

#include "../env_scope.h"

namespace vkt::test {

/// Sets VKT_MATMUL_VARIANT for one scope and restores what was there.
class VariantScope : public EnvScope {
 public:
  explicit VariantScope(const char* value) : EnvScope("VKT_MATMUL_VARIANT", value) {}
};

}  // namespace vkt::test
