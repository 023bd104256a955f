#pragma once
// Sets VKT_MATMUL_VARIANT for one scope, so a test runs matmul's (and conv2d's)
// texel and tiled kernels on the same device.

#include <cstdlib>
#include <optional>
#include <string>

namespace vkt::test {

/// Sets VKT_MATMUL_VARIANT for one scope and restores what was there.
class VariantScope {
 public:
  explicit VariantScope(const char* value) {
    if (const char* old = std::getenv("VKT_MATMUL_VARIANT")) old_ = old;
    ::setenv("VKT_MATMUL_VARIANT", value, 1);
  }
  ~VariantScope() {
    if (old_)
      ::setenv("VKT_MATMUL_VARIANT", old_->c_str(), 1);
    else
      ::unsetenv("VKT_MATMUL_VARIANT");
  }
  VariantScope(const VariantScope&) = delete;
  VariantScope& operator=(const VariantScope&) = delete;

 private:
  std::optional<std::string> old_;
};

}  // namespace vkt::test
