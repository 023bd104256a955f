// The samples' examples/s is the steady rate after the first step, whose
// time (pipelines built, the first uploads) shows as first_step_s instead.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "../samples/sample_throughput.h"

TEST_CASE("sample throughput: the rate leaves out the first step") {
  using namespace std::chrono_literals;
  Throughput t;
  t.begin();
  std::this_thread::sleep_for(1s);  // a cold first step
  t.after_step(1, 0.0f);
  for (int step = 2; step <= 5; ++step) {
    std::this_thread::sleep_for(1ms);
    t.after_step(static_cast<std::uint64_t>(step), 0.0f);
  }
  t.end();
  // 4 steps of at least 1 ms each: at most 1000 steps/s; with the first step
  // counted it would be 5 in just over 1 s. 15 leaves a loaded machine 260 ms
  // for the 4 short sleeps.
  CHECK(t.steps_per_s() > 15);
  CHECK(t.steps_per_s() <= 1000);
  CHECK(t.first_step_s() >= t.startup_s() + 1.0);

  Throughput one;  // a one-step run reports that step: at least 100 ms
  one.begin();
  std::this_thread::sleep_for(100ms);
  one.after_step(1, 0.0f);
  one.end();
  CHECK(one.steps_per_s() > 0);
  CHECK(one.steps_per_s() <= 10);
}
