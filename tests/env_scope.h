#pragma once
// Sets (or unsets) an environment variable for one scope and puts back what
// was there, even when an assertion ends the test early: a test that changes
// VKT_DEVICES or VKT_MATMUL_VARIANT must not change the tests after it.

#include <cstdlib>
#include <optional>
#include <string>

namespace vkt::test {

/// `value` nullptr unsets the variable for the scope.
class EnvScope {
 public:
  EnvScope(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    set(value);
  }
  ~EnvScope() { set(old_ ? old_->c_str() : nullptr); }
  EnvScope(const EnvScope&) = delete;
  EnvScope& operator=(const EnvScope&) = delete;

  /// A new value within the same scope (the old one still comes back at its end).
  void set(const char* value) const {
    if (value) {
      ::setenv(name_.c_str(), value, 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace vkt::test
