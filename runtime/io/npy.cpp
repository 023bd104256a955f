#include "npy.h"

#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>

#include "../vulkan/error.h"

namespace vkt {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the .npy reader assumes a little-endian host");

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("cannot open '{}'; check the path", path));
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

template <typename T>
T load(const std::string& bytes, std::size_t at) {
  T v;
  std::memcpy(&v, bytes.data() + at, sizeof(T));
  return v;
}

template <typename T>
void write(const std::string& path, const std::vector<std::int64_t>& shape,
           const std::vector<T>& values, const char* descr) {
  std::int64_t count = 1;
  for (std::int64_t d : shape) count *= d;
  if (count != static_cast<std::int64_t>(values.size())) {
    throw Error(fmt::format("write_npy('{}'): shape holds {} values but {} were given", path, count,
                            values.size()));
  }
  std::string dims;
  for (std::int64_t d : shape) dims += fmt::format("{}, ", d);
  if (shape.size() > 1) dims.resize(dims.size() - 2);  // (3, 4) but (3,) for one dimension
  std::string header =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, dims);
  // Pad so that the data starts on a 64-byte boundary, ending with '\n'.
  const std::size_t total = 10 + header.size() + 1;
  header += std::string((64 - total % 64) % 64, ' ') + "\n";
  std::ofstream out(path, std::ios::binary);
  const auto length = static_cast<std::uint16_t>(header.size());
  out.write("\x93NUMPY\x01\x00", 8);
  out.write(reinterpret_cast<const char*>(&length), 2);
  out << header;
  out.write(reinterpret_cast<const char*>(values.data()),
            static_cast<std::streamsize>(values.size() * sizeof(T)));
  if (!out) throw Error(fmt::format("write_npy('{}'): the write failed", path));
}

}  // namespace

NpyArray read_npy(const std::string& path) {
  const std::string bytes = read_all(path);
  const auto bad = [&](const std::string& what) {
    return Error(fmt::format("'{}' is not a readable .npy file: {}", path, what));
  };
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) throw bad("bad magic string");
  const int major = static_cast<unsigned char>(bytes[6]);
  std::size_t header_length = 0, data_start = 0;
  if (major == 1) {
    header_length = load<std::uint16_t>(bytes, 8);
    data_start = 10 + header_length;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) throw bad("truncated header");
    header_length = load<std::uint32_t>(bytes, 8);
    data_start = 12 + header_length;
  } else {
    throw bad(fmt::format("format version {} is unknown (1 to 3 are)", major));
  }
  if (data_start > bytes.size()) throw bad("truncated header");
  const std::string header = bytes.substr(data_start - header_length, header_length);

  std::smatch m;
  if (!std::regex_search(header, m, std::regex(R"('descr'\s*:\s*'([<|>=]?)([fi])([48])')"))) {
    throw bad("its 'descr' is not a 4- or 8-byte float or integer");
  }
  if (m[1] == ">") throw bad("big-endian data; save it little-endian");
  const bool integer = m[2] == "i";
  const int width = m[3] == "8" ? 8 : 4;
  if (!std::regex_search(header, std::regex(R"('fortran_order'\s*:\s*False)"))) {
    throw bad("Fortran order; save it in C order (numpy.ascontiguousarray)");
  }
  if (!std::regex_search(header, m, std::regex(R"('shape'\s*:\s*\(([^)]*)\))"))) {
    throw bad("no 'shape' in its header");
  }
  NpyArray array;
  array.integer = integer;
  std::int64_t count = 1;
  const std::string dims = m[1];
  const std::regex number(R"(\d+)");
  for (auto it = std::sregex_iterator(dims.begin(), dims.end(), number);
       it != std::sregex_iterator(); ++it) {
    array.shape.push_back(std::stoll(it->str()));
    count *= array.shape.back();
  }
  const std::size_t need = static_cast<std::size_t>(count) * static_cast<std::size_t>(width);
  if (bytes.size() - data_start < need) {
    throw bad(fmt::format("its shape needs {} bytes of data but the file holds {}", need,
                          bytes.size() - data_start));
  }
  for (std::int64_t i = 0; i < count; ++i) {
    const std::size_t at =
        data_start + static_cast<std::size_t>(i) * static_cast<std::size_t>(width);
    if (!integer) {
      array.f32.push_back(width == 4 ? load<float>(bytes, at)
                                     : static_cast<float>(load<double>(bytes, at)));
    } else if (width == 4) {
      array.i32.push_back(load<std::int32_t>(bytes, at));
    } else {
      const auto v = load<std::int64_t>(bytes, at);
      if (v < std::numeric_limits<std::int32_t>::min() ||
          v > std::numeric_limits<std::int32_t>::max()) {
        throw bad(fmt::format("element {} ({}) does not fit in 32 bits", i, v));
      }
      array.i32.push_back(static_cast<std::int32_t>(v));
    }
  }
  return array;
}

void write_npy(const std::string& path, const std::vector<std::int64_t>& shape,
               const std::vector<float>& values) {
  write(path, shape, values, "<f4");
}

void write_npy(const std::string& path, const std::vector<std::int64_t>& shape,
               const std::vector<std::int32_t>& values) {
  write(path, shape, values, "<i4");
}

}  // namespace vkt
