#pragma once
// Included once by each Catch main (after catch.hpp, with CATCH_CONFIG_RUNNER):
// each test case's models share its TowerDevicePool (tower_devices.h), and no
// later test case does. It goes when the test case ends, once the test
// case's own objects are gone.

#include "tower_devices.h"

namespace vkt::test {

struct ReleaseTowerDevices : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testCaseEnded(const Catch::TestCaseStats& stats) override {
    release_tower_devices();
    TestEventListenerBase::testCaseEnded(stats);
  }
};
CATCH_REGISTER_LISTENER(ReleaseTowerDevices)

}  // namespace vkt::test
