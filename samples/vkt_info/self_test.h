#pragma once
// vkt-info's per-device check: saxpy on the device, compared on the host.

#include <cstdint>
#include <string>

#include <vktower/vktower.h>

struct SelfTestResult {
  bool passed = false;
  std::uint32_t wrong = 0;  ///< elements outside tolerance
  double max_error = 0;     ///< largest relative error seen
  double device_ms = 0;     ///< submit to completion of the dispatch
  std::string error;        ///< a vkt::Error's message, if one was thrown
};

/// Runs y = a*x + y over `elements` random floats on `device` and checks every
/// element against the same computation in double precision on the host.
SelfTestResult run_self_test(vkt::Device& device, std::uint32_t elements);
