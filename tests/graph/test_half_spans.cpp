// The span conversions (round_to_f16, widen_bf16, ...), written without
// branches for the half exchange, against the one-value conversions that
// test_half.cpp checks: the same bits on every half pattern and on f32
// patterns of every exponent, sign and rounding case, NaNs included.
#include <bit>
#include <cstdint>
#include <vector>

#include <vktower/runtime/graph/half.h>

#include "../test_support.h"

namespace {

/// f32 bit patterns: every exponent and sign with the mantissas at each
/// format's rounding edges (ties, just below and above, odd and even kept
/// bits, all ones), then a stride through all 2^32 patterns.
std::vector<float> f32_patterns() {
  const std::uint32_t mantissas[] = {0x000000u, 0x000001u, 0x000fffu, 0x001000u, 0x001001u,
                                     0x002fffu, 0x003000u, 0x003001u, 0x007fffu, 0x008000u,
                                     0x008001u, 0x018000u, 0x3ff000u, 0x7fe000u, 0x7ff000u,
                                     0x7fffffu, 0x400000u, 0x400001u, 0x7f8000u, 0x7fc000u};
  std::vector<float> v;
  for (std::uint32_t sign = 0; sign < 2; ++sign) {
    for (std::uint32_t e = 0; e < 256; ++e) {
      for (const std::uint32_t m : mantissas) {
        v.push_back(std::bit_cast<float>((sign << 31) | (e << 23) | m));
      }
    }
  }
  for (std::uint64_t bits = 0; bits < (std::uint64_t{1} << 32); bits += 4093) {
    v.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(bits)));
  }
  return v;
}

std::size_t first_difference(const std::vector<std::uint16_t>& a,
                             const std::vector<std::uint16_t>& b) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return i;
  }
  return a.size();
}

}  // namespace

TEST_CASE("the span conversions round f32 to f16 and bf16 with the one-value conversions' bits") {
  const std::vector<float> values = f32_patterns();
  REQUIRE(values.size() > 1'000'000);
  std::vector<std::uint16_t> f16(values.size()), bf16(values.size());
  vkt::round_to_f16(values, f16);
  vkt::round_to_bf16(values, bf16);
  std::vector<std::uint16_t> want_f16(values.size()), want_bf16(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    want_f16[i] = vkt::f32_to_f16(values[i]);
    want_bf16[i] = vkt::f32_to_bf16(values[i]);
  }
  const std::size_t at_f16 = first_difference(f16, want_f16);
  const std::size_t at_bf16 = first_difference(bf16, want_bf16);
  INFO("f16: first difference at f32 bits 0x"
       << std::hex << (at_f16 < values.size() ? std::bit_cast<std::uint32_t>(values[at_f16]) : 0u)
       << ", bf16: at 0x"
       << (at_bf16 < values.size() ? std::bit_cast<std::uint32_t>(values[at_bf16]) : 0u));
  CHECK(at_f16 == values.size());
  CHECK(at_bf16 == values.size());
}

TEST_CASE("the span conversions widen every f16 and bf16 pattern with the one-value bits") {
  std::vector<std::uint16_t> all(0x10000);
  for (std::uint32_t bits = 0; bits < 0x10000u; ++bits)
    all[bits] = static_cast<std::uint16_t>(bits);
  std::vector<float> f16(all.size()), bf16(all.size());
  vkt::widen_f16(all, f16);
  vkt::widen_bf16(all, bf16);
  std::int64_t wrong_f16 = 0, wrong_bf16 = 0;
  for (std::uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    wrong_f16 +=
        std::bit_cast<std::uint32_t>(f16[bits]) != std::bit_cast<std::uint32_t>(vkt::f16_to_f32(h));
    wrong_bf16 += std::bit_cast<std::uint32_t>(bf16[bits]) !=
                  std::bit_cast<std::uint32_t>(vkt::bf16_to_f32(h));
  }
  CHECK(wrong_f16 == 0);
  CHECK(wrong_bf16 == 0);
}
