#include "npy.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>
#include <string_view>

#include "../graph/half.h"
#include "../graph/shape.h"
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
  for (std::int64_t d : shape) {
    if (d < 0 || (d > 0 && count > Shape::kMaxElements / d)) {
      throw Error(
          fmt::format("write_npy('{}'): shape ({}) has a negative dimension or more than "
                      "{} elements",
                      path, fmt::join(shape, ", "), Shape::kMaxElements));
    }
    count *= d;
  }
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

namespace {

/// The header dictionary numpy writes, e.g.
///   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
/// parsed by hand: Python literals of three kinds only, every byte checked.
struct NpyHeader {
  std::string descr;
  std::optional<bool> fortran_order;
  std::optional<std::vector<std::uint64_t>> shape;
};

class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::function<Error(const std::string&)>& bad)
      : text_(text), bad_(bad) {}

  NpyHeader parse() {
    NpyHeader h;
    expect('{');
    while (!take('}')) {
      const std::string key = string();
      expect(':');
      if (key == "descr") {
        h.descr = string();
      } else if (key == "fortran_order") {
        h.fortran_order = boolean();
      } else if (key == "shape") {
        h.shape = tuple();
      } else {
        throw bad_(fmt::format("its header has an unknown key '{}'", key));
      }
      if (!take(',')) {
        expect('}');
        break;
      }
    }
    skip_space();
    if (at_ != text_.size()) throw bad_("its header has text after the dictionary");
    return h;
  }

 private:
  void skip_space() {
    while (at_ < text_.size() && (text_[at_] == ' ' || text_[at_] == '\n')) ++at_;
  }
  bool take(char c) {
    skip_space();
    if (at_ < text_.size() && text_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!take(c)) throw bad_(fmt::format("its header is not a dictionary ('{}' missing)", c));
  }
  std::string string() {
    expect('\'');
    const std::size_t end = text_.find('\'', at_);
    if (end == std::string_view::npos) throw bad_("its header has an unterminated string");
    std::string s(text_.substr(at_, end - at_));
    at_ = end + 1;
    return s;
  }
  bool boolean() {
    skip_space();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      if (text_.substr(at_).starts_with(word)) {
        at_ += std::string_view(word).size();
        return value;
      }
    }
    throw bad_("its 'fortran_order' is neither True nor False");
  }
  // (), (3,) or (3, 4): non-negative decimal integers that fit in 64 bits.
  std::vector<std::uint64_t> tuple() {
    expect('(');
    std::vector<std::uint64_t> dims;
    while (!take(')')) {
      skip_space();
      std::uint64_t d = 0;
      const char* begin = text_.data() + at_;
      const auto [stop, ec] = std::from_chars(begin, text_.data() + text_.size(), d);
      if (stop == begin || *begin == '-' || ec != std::errc()) {
        const std::size_t end = text_.find_first_of(",)", at_);
        throw bad_(
            fmt::format("its shape has the dimension '{}'; dimensions are integers from "
                        "1 to {}",
                        text_.substr(at_, end == std::string_view::npos ? 20 : end - at_),
                        Shape::kMaxElements));
      }
      at_ += static_cast<std::size_t>(stop - begin);
      dims.push_back(d);
      if (!take(',')) {
        expect(')');
        break;
      }
    }
    return dims;
  }

  std::string_view text_;
  const std::function<Error(const std::string&)>& bad_;
  std::size_t at_ = 0;
};

/// An element type of the .npy files read: kind 'f' (float), 'i' (signed),
/// 'u' (unsigned) or 'b' (bool), and its width in bytes.
struct NpyType {
  char kind = 'f';
  std::size_t width = 4;
};

NpyType parse_descr(const std::string& descr, const std::function<Error(const std::string&)>& bad) {
  static constexpr std::string_view kTypes[] = {"f2", "f4", "f8", "i1", "i2", "i4",
                                                "i8", "u1", "u2", "u4", "u8", "b1"};
  const std::string_view code = descr.size() == 3 ? std::string_view(descr).substr(1) : "";
  if (descr.size() != 3 || std::string_view("<|=>").find(descr[0]) == std::string_view::npos ||
      std::find(std::begin(kTypes), std::end(kTypes), code) == std::end(kTypes)) {
    throw bad(fmt::format(
        "its 'descr' '{}' is not a type vktower reads: a float (f2, f4, f8), an integer (i1, "
        "i2, i4, i8, u1, u2, u4, u8) or bool (b1); convert the array with numpy's astype",
        descr));
  }
  const NpyType type{descr[1], static_cast<std::size_t>(descr[2] - '0')};
  if (descr[0] == '>' && type.width > 1) throw bad("big-endian data; save it little-endian");
  return type;
}

/// Appends element `index` (at byte `at`) to `array`: floats as f32 (f2
/// widened exactly, f8 rounded), integers and bools as i32, a value outside
/// the i32 range an error.
void append_element(NpyArray& array, NpyType type, const std::string& bytes, std::size_t at,
                    std::size_t index, const std::function<Error(const std::string&)>& bad) {
  if (type.kind == 'f') {
    array.f32.push_back(type.width == 2   ? f16_to_f32(load<std::uint16_t>(bytes, at))
                        : type.width == 4 ? load<float>(bytes, at)
                                          : static_cast<float>(load<double>(bytes, at)));
    return;
  }
  std::int64_t v = 0;
  if (type.kind == 'u' && type.width == 8) {
    // Above 2^63 it would not fit in v either.
    const auto u = load<std::uint64_t>(bytes, at);
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int32_t>::max())) {
      throw bad(fmt::format("element {} ({}) does not fit in 32 bits", index, u));
    }
    v = static_cast<std::int64_t>(u);
  } else if (type.kind == 'b') {
    v = bytes[at] != 0 ? 1 : 0;
  } else if (type.kind == 'u') {
    v = type.width == 1   ? load<std::uint8_t>(bytes, at)
        : type.width == 2 ? load<std::uint16_t>(bytes, at)
                          : static_cast<std::int64_t>(load<std::uint32_t>(bytes, at));
  } else {
    v = type.width == 1   ? load<std::int8_t>(bytes, at)
        : type.width == 2 ? load<std::int16_t>(bytes, at)
        : type.width == 4 ? load<std::int32_t>(bytes, at)
                          : load<std::int64_t>(bytes, at);
  }
  if (v < std::numeric_limits<std::int32_t>::min() ||
      v > std::numeric_limits<std::int32_t>::max()) {
    throw bad(fmt::format("element {} ({}) does not fit in 32 bits", index, v));
  }
  array.i32.push_back(static_cast<std::int32_t>(v));
}

}  // namespace

NpyArray read_npy(const std::string& path) {
  const std::string bytes = read_all(path);
  const std::function<Error(const std::string&)> bad = [&](const std::string& what) {
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
  const NpyHeader header =
      HeaderParser(std::string_view(bytes).substr(data_start - header_length, header_length), bad)
          .parse();

  const NpyType type = parse_descr(header.descr, bad);
  if (!header.fortran_order) throw bad("no 'fortran_order' in its header");
  if (*header.fortran_order)
    throw bad("Fortran order; save it in C order (numpy.ascontiguousarray)");
  if (!header.shape) throw bad("no 'shape' in its header");
  if (header.shape->size() > static_cast<std::size_t>(Shape::kMaxRank)) {
    throw bad(fmt::format("its shape has rank {}; vktower arrays have rank 0 to {}",
                          header.shape->size(), Shape::kMaxRank));
  }
  NpyArray array;
  array.integer = type.kind != 'f';
  std::uint64_t count = 1;
  for (const std::uint64_t d : *header.shape) {
    if (d < 1 ||
        d > static_cast<std::uint64_t>(Shape::kMaxElements / static_cast<std::int64_t>(count))) {
      throw bad(fmt::format("its shape ({}) has a dimension below 1 or more than {} elements",
                            fmt::join(*header.shape, ", "), Shape::kMaxElements));
    }
    count *= d;
    array.shape.push_back(static_cast<std::int64_t>(d));
  }
  // count <= 2^48, so count * 8 cannot overflow.
  const std::size_t need = static_cast<std::size_t>(count) * type.width;
  if (bytes.size() - data_start != need) {
    throw bad(fmt::format("its shape needs {} bytes of data but the file holds {}", need,
                          bytes.size() - data_start));
  }
  if (array.integer) {
    array.i32.reserve(static_cast<std::size_t>(count));
  } else {
    array.f32.reserve(static_cast<std::size_t>(count));
  }
  for (std::size_t i = 0; i < count; ++i) {
    append_element(array, type, bytes, data_start + i * type.width, i, bad);
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
