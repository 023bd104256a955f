// ReplicaSum: the towers' meeting point at each cross_replica_sum.
#include <catch2/catch.hpp>

#include <thread>
#include <vector>

#include <vktower/tower/replica_sum.h>

#include "../test_support.h"

using Catch::Matchers::Contains;

TEST_CASE("ReplicaSum adds every replica's values in replica order, point after point",
          "[replica_sum]") {
  vkt::ReplicaSum sums(3);
  std::vector<std::vector<float>> got(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      for (int point = 0; point < 50; ++point) {
        const std::vector<float> local{static_cast<float>(r + 1), static_cast<float>(point)};
        std::vector<float> sum(2);
        sums.exchange(r, local, sum);
        got[r].insert(got[r].end(), sum.begin(), sum.end());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    REQUIRE(got[r].size() == 100);
    for (int point = 0; point < 50; ++point) {
      CHECK(got[r][2 * point] == 6.0f);
      CHECK(got[r][2 * point + 1] == 3.0f * point);
    }
  }
}

TEST_CASE("ReplicaSum: a failed replica wakes the waiting ones with an error", "[replica_sum]") {
  vkt::ReplicaSum sums(2);
  std::string message;
  std::thread waiter([&] {
    std::vector<float> sum(1);
    message = vkt::test::error_of([&] { sums.exchange(0, std::vector<float>{1.0f}, sum); });
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  sums.abort();  // replica 1 failed before its sum
  waiter.join();
  CHECK_THAT(message, Contains("another tower failed"));
  // The next step starts clean.
  sums.reset();
  std::vector<float> a(1), b(1);
  std::thread other([&] { sums.exchange(1, std::vector<float>{2.0f}, b); });
  sums.exchange(0, std::vector<float>{1.0f}, a);
  other.join();
  CHECK(a[0] == 3.0f);
  CHECK(b[0] == 3.0f);
}

TEST_CASE("ReplicaSum refuses replicas that give values of different sizes", "[replica_sum]") {
  vkt::ReplicaSum sums(2);
  std::string first, second;
  std::thread other([&] {
    std::vector<float> sum(2);
    second = vkt::test::error_of([&] { sums.exchange(1, std::vector<float>{1.0f, 2.0f}, sum); });
  });
  std::vector<float> sum(1);
  first = vkt::test::error_of([&] { sums.exchange(0, std::vector<float>{1.0f}, sum); });
  other.join();
  // Whichever arrived last names the mismatch; the other is woken with an error.
  CHECK_THAT(first + second, Contains("every tower must run the same model"));
}
