#include "safetensors_header.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "../runtime/vulkan/error.h"
#include "json_strict.h"

// safetensors stores little-endian data; lengths and values are copied as they are.
static_assert(std::endian::native == std::endian::little,
              "safetensors files assume a little-endian host");

namespace vkt::models {
namespace {

using detail::json_quoted;
using nlohmann::json;
namespace fs = std::filesystem;

[[noreturn]] void refuse(const std::string& path, const std::string& problem) {
  throw Error(fmt::format("safetensors file '{}': {}", path, problem));
}

// The dims of entry `where`: non-negative integers whose product, and its
// byte count, fit in 64 bits.
std::vector<std::int64_t> checked_shape(const std::string& path, const std::string& where,
                                        const json& shape, std::uint64_t dtype_bytes,
                                        std::uint64_t& elements) {
  if (!shape.is_array()) refuse(path, where + " has no \"shape\" array");
  std::vector<std::int64_t> dims;
  elements = 1;
  std::uint64_t bytes = 0;
  for (const json& d : shape) {
    const bool fits =
        d.is_number_unsigned() && d.get<std::uint64_t>() <= static_cast<std::uint64_t>(INT64_MAX);
    if (!fits || __builtin_mul_overflow(elements, d.get<std::uint64_t>(), &elements) ||
        __builtin_mul_overflow(elements, dtype_bytes, &bytes)) {
      refuse(path, fmt::format("{} has shape {}: dimensions must be integers >= 0 whose "
                               "product's bytes fit in 64 bits",
                               where, json_quoted(shape.dump())));
    }
    dims.push_back(d.get<std::int64_t>());
  }
  return dims;
}

SafetensorsEntry parse_entry(const std::string& path, const std::string& name, const json& j,
                             std::uint64_t data_offset, std::uint64_t data_size) {
  const std::string where = "entry " + json_quoted(name);
  if (!j.is_object()) refuse(path, where + " is not a JSON object");
  const auto dtype = j.find("dtype");
  if (dtype == j.end() || !dtype->is_string() ||
      !safetensors_dtype_bytes(dtype->get<std::string>())) {
    refuse(path, fmt::format("{} has dtype {}, not a safetensors dtype (F32, F16, BF16, I64, ...)",
                             where, dtype == j.end() ? "(none)" : json_quoted(dtype->dump())));
  }
  SafetensorsEntry e;
  e.name = name;
  e.dtype = dtype->get<std::string>();
  e.file = path;
  const std::uint64_t size = *safetensors_dtype_bytes(e.dtype);
  const auto shape = j.find("shape");
  if (shape == j.end()) refuse(path, where + " has no \"shape\" array");
  e.shape = checked_shape(path, where, *shape, size, e.elements);
  const auto offsets = j.find("data_offsets");
  if (offsets == j.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) {
    refuse(path, where + " has no \"data_offsets\" [begin, end] of integers >= 0");
  }
  const auto begin = (*offsets)[0].get<std::uint64_t>();
  const auto end = (*offsets)[1].get<std::uint64_t>();
  if (begin > end || end > data_size) {
    refuse(path, fmt::format("{} has data_offsets [{}, {}] outside the {}-byte data section (is "
                             "the file truncated?)",
                             where, begin, end, data_size));
  }
  e.bytes = end - begin;
  e.offset = data_offset + begin;
  // elements * size fits (checked_shape), so this compares exact counts.
  if (e.bytes != e.elements * size) {
    refuse(path, fmt::format("{} of shape {} ({}) needs {} bytes but its data_offsets span {}",
                             where, e.shape_str(), e.dtype, e.elements * size, e.bytes));
  }
  return e;
}

// The format requires the entries to lie back to back from byte 0 and cover
// the data section: overlapping entries would alias, and a gap hides bytes.
void check_tiling(const std::string& path, std::vector<const SafetensorsEntry*> by_offset,
                  std::uint64_t data_offset, std::uint64_t data_size) {
  std::sort(by_offset.begin(), by_offset.end(), [](const auto* a, const auto* b) {
    return a->offset != b->offset ? a->offset < b->offset : a->bytes < b->bytes;
  });
  std::uint64_t at = 0;
  for (const SafetensorsEntry* e : by_offset) {
    if (e->offset - data_offset != at) {
      refuse(path, fmt::format("entry {} starts at byte {} of the data section, not {} where the "
                               "entries before it end (overlapping entries or a gap)",
                               json_quoted(e->name), e->offset - data_offset, at));
    }
    at += e->bytes;
  }
  if (at != data_size) {
    refuse(path,
           fmt::format("the data section has {} bytes but the entries cover {}", data_size, at));
  }
}

std::map<std::string, std::string> parse_metadata(const std::string& path, const json& meta) {
  std::map<std::string, std::string> out;
  if (!meta.is_object()) refuse(path, "\"__metadata__\" is not a JSON object of strings");
  for (const auto& [key, value] : meta.items()) {
    if (!value.is_string()) {
      refuse(path, fmt::format("\"__metadata__\" value {} is not a string", json_quoted(key)));
    }
    out.emplace(key, value.get<std::string>());
  }
  return out;
}

}  // namespace

std::optional<DType> SafetensorsEntry::value_type() const {
  if (dtype == "F32") return DType::F32;
  if (dtype == "F16") return DType::F16;
  if (dtype == "BF16") return DType::BF16;
  return std::nullopt;
}

std::string SafetensorsEntry::shape_str() const {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

std::optional<std::uint64_t> safetensors_dtype_bytes(const std::string& dtype) {
  static const std::map<std::string, std::uint64_t, std::less<>> sizes{
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"I64", 8}, {"U64", 8},     {"F64", 8}};
  const auto it = sizes.find(dtype);
  return it == sizes.end() ? std::nullopt : std::optional(it->second);
}

const char* safetensors_dtype_name(DType dtype) {
  return dtype == DType::F16 ? "F16" : dtype == DType::BF16 ? "BF16" : "F32";
}

std::uint64_t safetensors_header_length(const std::string& path, std::span<const char> first_bytes,
                                        std::uint64_t file_size) {
  if (file_size < 8 || first_bytes.size() < 8) {
    refuse(path, fmt::format("it has {} bytes, fewer than the 8-byte header length (is the file "
                             "truncated?)",
                             file_size));
  }
  std::uint64_t length = 0;
  std::memcpy(&length, first_bytes.data(), 8);
  if (length > file_size - 8 || length > kMaxSafetensorsHeaderBytes) {
    refuse(path, fmt::format("its header length field says {} bytes but the file has {} after it "
                             "and headers are at most {} (is the file truncated, or not a "
                             "safetensors file?)",
                             length, file_size - 8, kMaxSafetensorsHeaderBytes));
  }
  return length;
}

SafetensorsHeader parse_safetensors_header(const std::string& path, std::string_view header_json,
                                           std::uint64_t file_size) {
  const std::uint64_t data_offset = 8 + header_json.size();
  if (data_offset > file_size) refuse(path, "its header runs past the end of the file");
  const json header =
      detail::parse_json_strict(header_json, fmt::format("safetensors file '{}' header", path));
  if (!header.is_object()) refuse(path, "its header is not a JSON object");
  SafetensorsHeader out;
  std::vector<const SafetensorsEntry*> by_offset;
  out.entries.reserve(header.size());
  for (const auto& [name, value] : header.items()) {  // a std::map: sorted by name
    if (name == "__metadata__") {
      out.metadata = parse_metadata(path, value);
    } else {
      out.entries.push_back(parse_entry(path, name, value, data_offset, file_size - data_offset));
    }
  }
  for (const SafetensorsEntry& e : out.entries) by_offset.push_back(&e);
  check_tiling(path, std::move(by_offset), data_offset, file_size - data_offset);
  return out;
}

SafetensorsHeader read_safetensors_header(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    refuse(path, "it is not a readable regular file (check the path and its permissions)");
  }
  const std::uint64_t file_size = fs::file_size(path, ec);
  std::ifstream in(path, std::ios::binary);
  if (ec || !in) refuse(path, "the file cannot be opened (check its permissions)");
  char first[8] = {};
  in.read(first, 8);
  const std::uint64_t length =
      safetensors_header_length(path, {first, static_cast<std::size_t>(in.gcount())}, file_size);
  std::string text(static_cast<std::size_t>(length), '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(length))) {
    refuse(path, "reading its header failed (did the file shrink while being read?)");
  }
  return parse_safetensors_header(path, text, file_size);
}

std::vector<char> read_entry_bytes(const SafetensorsEntry& entry) {
  std::vector<char> bytes(static_cast<std::size_t>(entry.bytes));
  std::ifstream in(entry.file, std::ios::binary);
  if (in) in.seekg(static_cast<std::streamoff>(entry.offset));
  if (!in || !in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) {
    refuse(entry.file, fmt::format("reading entry {} failed (was the file changed or truncated "
                                   "since it was opened?)",
                                   json_quoted(entry.name)));
  }
  return bytes;
}

}  // namespace vkt::models
