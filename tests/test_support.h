#pragma once
// Shared helpers for the runtime tests.

#include <catch2/catch.hpp>

#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <vktower/runtime/graph/half.h>
#include <vktower/runtime/vulkan/error.h>

namespace vkt::test {

/// The checkout's root: $VKT_SOURCE_DIR where set (a bundle unpacked on a
/// machine without the checkout, scripts/gpu-report.sh), else the source tree
/// this binary was built from.
inline std::filesystem::path source_dir() {
  if (const char* env = std::getenv("VKT_SOURCE_DIR"); env != nullptr && *env != '\0') return env;
  return VKT_SOURCE_DIR;
}

/// samples/data under source_dir().
inline std::filesystem::path samples_data_dir() {
  return source_dir() / "samples" / "data";
}

/// A program built beside the test binary (found beside it when the binaries
/// were moved together), else at the path the build gave it.
inline std::filesystem::path sibling_program(const char* built_path) {
  const std::filesystem::path built(built_path);
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path beside = self.parent_path() / built.filename();
    if (std::filesystem::exists(beside, ec)) return beside;
  }
  return built;
}

inline std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

/// Each value's bits: two float vectors compared bit for bit (a NaN equals
/// its own bits, -0 differs from 0), with the differing element in Catch's message.
inline std::vector<std::uint32_t> float_bits(const std::vector<float>& v) {
  std::vector<std::uint32_t> out;
  out.reserve(v.size());
  for (const float f : v) out.push_back(std::bit_cast<std::uint32_t>(f));
  return out;
}

/// `values` rounded to the half type `dtype` (half.h's rounding), widened back.
inline std::vector<float> rounded_to_half(std::span<const float> values, DType dtype) {
  return from_half(to_half(values, dtype), dtype);
}

/// Whether two floats have the same bits.
inline bool same_bits(float a, float b) {
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

/// ||a - b|| / ||b|| (2-norms; ||a - b|| when b is 0): how far `a` is from the
/// reference `b` when only the order of float summation differs.
inline double norm_relative(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(b[i]) * b[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

/// Runs `fn`, requires it to throw vkt::Error, and returns the message.
template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const vkt::Error& e) {
    return e.what();
  }
  FAIL("expected a vkt::Error, none was thrown");
  return {};
}

/// A file's whole contents as they are on disk (empty when it cannot be read),
/// as a std::string or a std::vector<char>.
template <typename Bytes = std::string>
Bytes read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// Replaces `path`'s contents with `bytes`.
inline void write_file(const std::filesystem::path& path, std::span<const char> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// The one file in `dir` whose name starts with `prefix` (a cache the runtime
/// named after the device); fails the test unless there is exactly one.
inline std::filesystem::path only_file_starting(const std::filesystem::path& dir,
                                                const std::string& prefix) {
  std::vector<std::filesystem::path> found;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename().string().starts_with(prefix)) found.push_back(e.path());
  }
  REQUIRE(found.size() == 1);
  return found[0];
}

/// A fresh, empty directory per use, removed at scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           ("vkt-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

}  // namespace vkt::test
