// .npy reading and writing, and the errors of broken files.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include <vktower/runtime/io/npy.h>

#include "../test_support.h"

using Catch::Matchers::Contains;

namespace {

/// A .npy file written byte by byte, as numpy.save would for `header`.
std::string raw_npy(const std::string& name, std::string header, const std::string& data) {
  header += std::string((64 - (10 + header.size() + 1) % 64) % 64, ' ') + "\n";
  const std::string path = "/tmp/vkt_test_" + name;
  std::ofstream out(path, std::ios::binary);
  const auto length = static_cast<std::uint16_t>(header.size());
  out.write("\x93NUMPY\x01\x00", 8);
  out.write(reinterpret_cast<const char*>(&length), 2);
  out << header << data;
  return path;
}

template <typename T>
std::string bytes_of(std::initializer_list<T> values) {
  std::string s(values.size() * sizeof(T), '\0');
  std::memcpy(s.data(), std::data(values), s.size());
  return s;
}

}  // namespace

TEST_CASE("write_npy and read_npy round-trip f32 and i32 arrays") {
  const std::string f = "/tmp/vkt_test_f32.npy", i = "/tmp/vkt_test_i32.npy";
  vkt::write_npy(f, {2, 3}, std::vector<float>{1.5f, -2, 3, 4, 5, 6.25f});
  vkt::write_npy(i, {4}, std::vector<std::int32_t>{7, -8, 9, 2147483647});
  const vkt::NpyArray a = vkt::read_npy(f);
  CHECK(a.shape == std::vector<std::int64_t>{2, 3});
  CHECK_FALSE(a.integer);
  CHECK(a.f32 == std::vector<float>{1.5f, -2, 3, 4, 5, 6.25f});
  const vkt::NpyArray b = vkt::read_npy(i);
  CHECK(b.shape == std::vector<std::int64_t>{4});
  CHECK(b.integer);
  CHECK(b.i32 == std::vector<std::int32_t>{7, -8, 9, 2147483647});
  std::remove(f.c_str());
  std::remove(i.c_str());
}

TEST_CASE("read_npy converts f8 and i8 as numpy writes them") {
  const std::string f8 =
      raw_npy("f8.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 1), }",
              bytes_of<double>({0.1, -3.5}));
  const vkt::NpyArray a = vkt::read_npy(f8);
  CHECK(a.shape == std::vector<std::int64_t>{2, 1});
  CHECK(a.f32 == std::vector<float>{0.1f, -3.5f});
  const std::string i8 =
      raw_npy("i8.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }",
              bytes_of<std::int64_t>({1, -2, 3}));
  CHECK(vkt::read_npy(i8).i32 == std::vector<std::int32_t>{1, -2, 3});
  std::remove(f8.c_str());
  std::remove(i8.c_str());
}

namespace {

/// read_npy of a one-dimensional array of `descr` holding `data`.
vkt::NpyArray read_raw(const std::string& descr, std::size_t n, const std::string& data) {
  const std::string path = raw_npy(
      "types.npy",
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({},), }}", descr, n), data);
  vkt::NpyArray a = vkt::read_npy(path);
  std::remove(path.c_str());
  return a;
}

std::string refusal(const std::string& descr, std::size_t n, const std::string& data) {
  return vkt::test::error_of([&] { read_raw(descr, n, data); });
}

}  // namespace

TEST_CASE("read_npy reads numpy's half, narrow and unsigned integer and bool arrays") {
  // f2: 1, the least subnormal (2^-24), infinity and the most negative normal.
  const vkt::NpyArray h =
      read_raw("<f2", 4, bytes_of<std::uint16_t>({0x3c00, 0x0001, 0x7c00, 0xfbff}));
  CHECK_FALSE(h.integer);
  CHECK(h.f32 == std::vector<float>{1.0f, std::ldexp(1.0f, -24), INFINITY, -65504.0f});
  CHECK(read_raw("|i1", 3, bytes_of<std::int8_t>({-128, 127, -1})).i32 ==
        std::vector<std::int32_t>{-128, 127, -1});
  CHECK(read_raw("<i2", 2, bytes_of<std::int16_t>({-32768, 32767})).i32 ==
        std::vector<std::int32_t>{-32768, 32767});
  const vkt::NpyArray u1 = read_raw("|u1", 3, bytes_of<std::uint8_t>({0, 255, 7}));
  CHECK(u1.integer);
  CHECK(u1.i32 == std::vector<std::int32_t>{0, 255, 7});
  CHECK(read_raw("<u2", 1, bytes_of<std::uint16_t>({65535})).i32 ==
        std::vector<std::int32_t>{65535});
  CHECK(read_raw("<u4", 1, bytes_of<std::uint32_t>({2147483647u})).i32 ==
        std::vector<std::int32_t>{2147483647});
  CHECK(read_raw("<u8", 2, bytes_of<std::uint64_t>({2147483647u, 5})).i32 ==
        std::vector<std::int32_t>{2147483647, 5});
  CHECK(read_raw("|b1", 3, bytes_of<std::uint8_t>({1, 0, 1})).i32 ==
        std::vector<std::int32_t>{1, 0, 1});
  // Past i32: the element and its value, unsigned ones above 2^63 too.
  CHECK_THAT(refusal("<u4", 2, bytes_of<std::uint32_t>({1, 2147483648u})),
             Contains("element 1 (2147483648) does not fit in 32 bits"));
  CHECK_THAT(refusal("<u8", 1, bytes_of<std::uint64_t>({~std::uint64_t{0}})),
             Contains("element 0 (18446744073709551615) does not fit in 32 bits"));
  CHECK_THAT(refusal(">i2", 1, bytes_of<std::int16_t>({1})), Contains("big-endian"));
  CHECK_THAT(refusal("<f16", 1, std::string(16, '\0')),
             Contains("'<f16' is not a type vktower reads") && Contains("astype"));
  CHECK_THAT(refusal("<u3", 1, std::string(3, '\0')), Contains("'<u3'"));
  // The data's size follows the element's width.
  CHECK_THAT(refusal("<f2", 3, bytes_of<std::uint16_t>({1, 2})),
             Contains("needs 6 bytes of data but the file holds 4"));
}

TEST_CASE("read_npy errors name the file and the problem") {
  const std::string fortran =
      raw_npy("fortran.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }",
              bytes_of<float>({1, 2}));
  CHECK_THAT(vkt::test::error_of([&] { vkt::read_npy(fortran); }), Contains("Fortran order"));
  const std::string truncated =
      raw_npy("short.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
              bytes_of<float>({1, 2}));
  const std::string message = vkt::test::error_of([&] { vkt::read_npy(truncated); });
  CHECK_THAT(message, Contains(truncated));
  CHECK_THAT(message, Contains("needs 12 bytes of data but the file holds 8"));
  const std::string complex =
      raw_npy("complex.npy", "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }",
              bytes_of<float>({1, 2}));
  CHECK_THAT(vkt::test::error_of([&] { vkt::read_npy(complex); }), Contains("'descr'"));
  const std::string big =
      raw_npy("big.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }",
              bytes_of<std::int64_t>({std::int64_t{1} << 40}));
  CHECK_THAT(vkt::test::error_of([&] { vkt::read_npy(big); }), Contains("does not fit in 32 bits"));
  const std::string text = "/tmp/vkt_test_text.npy";
  std::ofstream(text) << "not numpy at all";
  CHECK_THAT(vkt::test::error_of([&] { vkt::read_npy(text); }), Contains("bad magic string"));
  for (const std::string& p : {fortran, truncated, complex, big, text}) std::remove(p.c_str());
}

TEST_CASE("read_npy refuses shapes that overflow, are negative or disagree with the data") {
  const auto refused = [](const std::string& name, const std::string& shape,
                          const std::string& data) {
    const std::string path =
        raw_npy(name, "{'descr': '<f8', 'fortran_order': False, 'shape': " + shape + ", }", data);
    const std::string message = vkt::test::error_of([&] { vkt::read_npy(path); });
    CHECK_THAT(message, Contains("'" + path + "' is not a readable .npy file"));
    std::remove(path.c_str());
    return message;
  };
  // 4611686018427387905 * 8 bytes wraps to 8: the size check once passed and
  // the reader ran off the end of the file.
  CHECK_THAT(refused("wrap.npy", "(4611686018427387905,)", std::string(24, '\0')),
             Contains("more than 281474976710656 elements"));
  // Too large for 64 bits: once std::out_of_range from std::stoll.
  CHECK_THAT(refused("huge.npy", "(99999999999999999999,)", ""),
             Contains("dimension '99999999999999999999'"));
  // 2^64 elements: the count wrapped to 0, so an empty file was accepted.
  CHECK_THAT(refused("square.npy", "(4294967296, 4294967296)", ""), Contains("more than"));
  // The sign was skipped: (-1, 6) was read as (1, 6).
  CHECK_THAT(refused("negative.npy", "(-1, 6)", std::string(48, '\0')), Contains("dimension '-1'"));
  CHECK_THAT(refused("empty.npy", "(0, 6)", ""), Contains("dimension below 1"));
  CHECK_THAT(refused("rank7.npy", "(1, 1, 1, 1, 1, 1, 1)", std::string(8, '\0')),
             Contains("rank 7"));
  CHECK_THAT(refused("long.npy", "(2,)", std::string(24, '\0')),
             Contains("needs 16 bytes of data but the file holds 24"));
  CHECK_THAT(refused("text.npy", "(2,) 'x'", std::string(16, '\0')), Contains("not a dictionary"));
  CHECK_THAT(refused("open.npy", "(2", std::string(16, '\0')),
             Contains("its shape has the dimension '}"));
}

TEST_CASE("read_npy parses a long header without deep recursion") {
  // A version 2 header of 1 MiB of spaces: a regex-based reader overflowed the stack.
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                       std::string(1 << 20, ' ') + "1,), }\n";
  const std::string path = "/tmp/vkt_test_long_header.npy";
  {
    std::ofstream out(path, std::ios::binary);
    const auto length = static_cast<std::uint32_t>(header.size());
    out.write("\x93NUMPY\x02\x00", 8);
    out.write(reinterpret_cast<const char*>(&length), 4);
    out << header << bytes_of<float>({2.5f});
  }
  const vkt::NpyArray a = vkt::read_npy(path);
  CHECK(a.shape == std::vector<std::int64_t>{1});
  CHECK(a.f32 == std::vector<float>{2.5f});
  std::remove(path.c_str());
}
