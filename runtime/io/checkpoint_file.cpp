#include "checkpoint_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "../graph/half.h"
#include "../vulkan/error.h"

// safetensors stores little-endian data; we copy host floats as they are.
static_assert(std::endian::native == std::endian::little,
              "checkpoints assume a little-endian host");

namespace vkt::detail {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr std::string_view kFormat = "vktower-2";
constexpr std::string_view kUnversionedFormat = "vktower";  // before header_crc32
// How header_crc32 appears in the raw header: nlohmann dumps compactly, and a
// quote inside any other key or string is escaped, so this occurs once only.
constexpr std::string_view kHeaderCrcKey = R"("header_crc32":")";
constexpr std::string_view kCrcPlaceholder = "00000000";

std::uint32_t crc32_of(std::span<const char> data, std::uint32_t crc = 0) {
  // zlib takes uInt lengths: feed large sections in pieces.
  while (!data.empty()) {
    const std::size_t n = std::min<std::size_t>(data.size(), 1u << 30);
    crc = static_cast<std::uint32_t>(
        ::crc32(crc, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(n)));
    data = data.subspan(n);
  }
  return crc;
}

// The first problem found in a file; every message names the file.
[[noreturn]] void refuse(const std::string& path, const std::string& problem) {
  throw Error(fmt::format("checkpoint '{}' cannot be loaded: {}", path, problem));
}

// A name or value taken from the file, quoted and escaped: messages stay one line.
std::string quoted(const std::string& text) {
  return json(text).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string metadata_string(const std::string& path, const json& meta, const char* key) {
  const auto it = meta.find(key);
  if (it == meta.end() || !it->is_string()) {
    refuse(path, fmt::format("the header metadata has no \"{}\" string", key));
  }
  return it->get<std::string>();
}

// Strict decimal: digits only, no sign, space or leading zero, fits in 64 bits.
std::uint64_t parse_decimal(const std::string& path, const char* key, const std::string& text,
                            std::uint64_t max = std::numeric_limits<std::uint64_t>::max()) {
  std::uint64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [stop, ec] = std::from_chars(text.data(), end, v);
  const bool digits_only = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return c >= '0' && c <= '9';
  });
  if (!digits_only || ec != std::errc() || stop != end || (text.size() > 1 && text[0] == '0') ||
      v > max) {
    refuse(path, fmt::format("metadata \"{}\" is {}, not a decimal number up to {}", key,
                             quoted(text), max));
  }
  return v;
}

// The regular file `path`, opened, and its size.
std::pair<std::ifstream, std::uint64_t> open_file(const std::string& path) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    refuse(path, "the file cannot be opened (check the path and its permissions)");
  }
  if (!fs::is_regular_file(status)) refuse(path, "it is not a regular file");
  std::ifstream in(path, std::ios::binary);
  const std::uintmax_t size = fs::file_size(path, ec);
  if (!in || ec) refuse(path, "the file cannot be opened (check the path and its permissions)");
  return {std::move(in), size};
}

// The next `bytes.size()` bytes of `in` into `bytes`.
void read_into(const std::string& path, std::ifstream& in, std::span<char> bytes) {
  if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) {
    refuse(path, "reading the file failed (did it shrink while being read?)");
  }
}

std::vector<char> read_whole_file(const std::string& path) {
  auto [in, size] = open_file(path);
  std::vector<char> bytes(static_cast<std::size_t>(size));
  read_into(path, in, bytes);
  return bytes;
}

// Whether a header claims to be vktower's: then every vktower check applies.
bool is_vktower(const json& header) {
  const auto meta = header.find("__metadata__");
  if (meta == header.end() || !meta->is_object()) return false;
  const auto format = meta->find("format");
  return format != meta->end() && format->is_string() &&
         format->get<std::string>().rfind(kUnversionedFormat, 0) == 0;
}

// Another program's safetensors file has no listing: its tensors must still lie
// one after another from byte 0 and cover the data exactly, as the format requires.
void check_contiguous(const std::string& path,
                      const std::map<std::string, CheckpointEntry>& entries,
                      std::uint64_t data_size) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
  for (const auto& [name, e] : entries) spans.emplace_back(e.begin, e.end);
  std::sort(spans.begin(), spans.end());
  std::uint64_t at = 0;
  for (const auto& [begin, end] : spans) {
    if (begin != at) {
      refuse(path, fmt::format("a tensor starts at byte {} of the data, not {} where the one "
                               "before it ends (overlapping or a gap)",
                               begin, at));
    }
    at = end;
  }
  if (at != data_size) {
    refuse(path,
           fmt::format("the data section has {} bytes but the tensors cover {}", data_size, at));
  }
}

// The header length field of a file of `file_size` bytes whose first bytes
// are `head` (at least 8 of them where the file has 8).
std::uint64_t header_length(const std::string& path, std::span<const char> head,
                            std::uint64_t file_size) {
  if (file_size < 8) {
    refuse(path, fmt::format("it has {} bytes, fewer than the 8-byte header length (is the file "
                             "truncated?)",
                             file_size));
  }
  std::uint64_t header_size = 0;
  std::memcpy(&header_size, head.data(), 8);
  if (header_size > file_size - 8) {
    refuse(path, fmt::format("its header length field says {} bytes but the file has only {} "
                             "after it (is the file truncated, or not a safetensors file?)",
                             header_size, file_size - 8));
  }
  return header_size;
}

// The JSON header (an object with vktower's metadata) and its length, from
// `file`: at least the length field and the header of a file of `file_size`
// bytes. With `any_safetensors`, a header without vktower's metadata is
// returned as it is.
std::pair<json, std::uint64_t> parse_header(const std::string& path, const std::vector<char>& file,
                                            std::uint64_t file_size, bool any_safetensors) {
  const std::uint64_t header_size = header_length(path, file, file_size);
  json header;
  try {
    header =
        json::parse(file.begin() + 8, file.begin() + 8 + static_cast<std::ptrdiff_t>(header_size));
  } catch (const json::exception& e) {
    refuse(path, fmt::format("its header is not valid JSON ({})", e.what()));
  }
  if (!header.is_object()) refuse(path, "its header is not a JSON object");
  const auto meta = header.find("__metadata__");
  if (any_safetensors && !is_vktower(header)) return {std::move(header), header_size};
  if (meta == header.end() || !meta->is_object()) {
    refuse(path, "its header has no \"__metadata__\" object (not written by vktower?)");
  }
  const std::string format = metadata_string(path, *meta, "format");
  if (format != kFormat && format != kUnversionedFormat) {
    refuse(path,
           fmt::format("metadata \"format\" is {}, expected \"{}\"", quoted(format), kFormat));
  }
  return {std::move(header), header_size};
}

// The length field and the header alone: a checkpoint's metadata without
// reading its data (a model's gigabytes), checked as read_whole_file's would be.
std::vector<char> read_file_header(const std::string& path, std::uint64_t& file_size) {
  auto [in, size] = open_file(path);
  file_size = size;
  std::vector<char> bytes(static_cast<std::size_t>(std::min<std::uint64_t>(size, 8)));
  read_into(path, in, bytes);
  const std::uint64_t header_size = header_length(path, bytes, size);
  bytes.resize(static_cast<std::size_t>(8 + header_size));
  read_into(path, in, std::span(bytes).subspan(8));
  return bytes;
}

// The crc32 of the length field and the header, header_crc32's digits zeroed.
void check_header_crc(const std::string& path, const std::vector<char>& file,
                      std::uint64_t header_size, const json& meta) {
  const std::string_view text(file.data() + 8, header_size);
  const std::size_t at = text.find(kHeaderCrcKey);
  if (at == std::string_view::npos || text.find(kHeaderCrcKey, at + 1) != std::string_view::npos) {
    refuse(path, "its header does not hold \"header_crc32\" exactly once");
  }
  const std::size_t digits = at + kHeaderCrcKey.size();
  const std::string stored = metadata_string(path, meta, "header_crc32");
  const auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  if (stored.size() != 8 || !std::all_of(stored.begin(), stored.end(), hex) ||
      text.substr(digits, 8) != stored) {
    refuse(path, fmt::format("metadata \"header_crc32\" is {}, not 8 lowercase hex digits",
                             quoted(stored)));
  }
  std::vector<char> prefix(file.begin(),
                           file.begin() + 8 + static_cast<std::ptrdiff_t>(header_size));
  std::memcpy(prefix.data() + 8 + digits, kCrcPlaceholder.data(), kCrcPlaceholder.size());
  const std::string actual = fmt::format("{:08x}", crc32_of(prefix));
  if (actual != stored) {
    refuse(path, fmt::format("the header's crc32 is {} but the header records {} (the header was "
                             "changed or damaged)",
                             actual, stored));
  }
}

// One tensor entry: F32, F16 or BF16, rank 0 to 6, every dimension >= 1,
// offsets spanning its bytes.
CheckpointEntry parse_entry(const std::string& path, const std::string& name, const json& j,
                            std::uint64_t data_size) {
  const std::string where = "tensor " + quoted(name);
  if (!j.is_object()) refuse(path, where + " is not a JSON object in the header");
  const auto dtype = j.find("dtype");
  DType type = DType::F32;
  if (dtype != j.end() && (*dtype == "F16" || *dtype == "BF16")) {
    type = *dtype == "F16" ? DType::F16 : DType::BF16;
  } else if (dtype == j.end() || *dtype != "F32") {
    refuse(path, fmt::format("{} has dtype {}, expected \"F32\", \"F16\" or \"BF16\"", where,
                             dtype == j.end() ? "(none)" : quoted(dtype->dump())));
  }
  const auto shape = j.find("shape");
  if (shape == j.end() || !shape->is_array()) refuse(path, where + " has no \"shape\" array");
  if (shape->size() > static_cast<std::size_t>(Shape::kMaxRank)) {
    refuse(path, fmt::format("{} has rank {}; vktower tensors have rank 0 to {}", where,
                             shape->size(), Shape::kMaxRank));
  }
  std::vector<std::int64_t> dims;
  std::uint64_t elements = 1;
  for (const json& d : *shape) {
    const std::uint64_t dim = d.is_number_unsigned() ? d.get<std::uint64_t>() : 0;
    if (dim < 1 || dim > static_cast<std::uint64_t>(Shape::kMaxElements) ||
        __builtin_mul_overflow(elements, dim, &elements) ||
        elements > static_cast<std::uint64_t>(Shape::kMaxElements)) {
      refuse(path, fmt::format("{} has shape {}; each dimension must be at least 1 and the "
                               "elements at most {}",
                               where, quoted(shape->dump()), Shape::kMaxElements));
    }
    dims.push_back(static_cast<std::int64_t>(dim));
  }
  const auto offsets = j.find("data_offsets");
  if (offsets == j.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) {
    refuse(path, where + " has no \"data_offsets\" [begin, end]");
  }
  CheckpointEntry e{Shape(std::move(dims)), type, (*offsets)[0].get<std::uint64_t>(),
                    (*offsets)[1].get<std::uint64_t>()};
  if (e.begin > e.end || e.end > data_size) {
    refuse(path, fmt::format("{} has data_offsets [{}, {}] outside the {}-byte data section (is "
                             "the file truncated?)",
                             where, e.begin, e.end, data_size));
  }
  // elements <= 2^48, so the byte count cannot overflow.
  const std::uint64_t bytes = elements * dtype_bytes(type);
  if (e.end - e.begin != bytes) {
    refuse(path, fmt::format("{} of shape {} ({}) needs {} bytes but its data_offsets span {}",
                             where, e.shape.str(), to_string(type), bytes, e.end - e.begin));
  }
  return e;
}

// The "variables" listing names every tensor once, with its shape, in data
// order; the tensors tile the data section exactly. Two tensors whose offsets
// were swapped, or a shape edited to another of the same size, break this.
void check_listing(const std::string& path, const json& meta,
                   std::map<std::string, CheckpointEntry>& entries, std::uint64_t data_size) {
  json listing;
  try {
    listing = json::parse(metadata_string(path, meta, "variables"));
  } catch (const json::exception& e) {
    refuse(path, fmt::format("metadata \"variables\" is not valid JSON ({})", e.what()));
  }
  if (!listing.is_array() || listing.size() != entries.size()) {
    refuse(path, fmt::format("metadata \"variables\" does not list the header's {} tensors",
                             entries.size()));
  }
  std::uint64_t at = 0;
  for (const json& item : listing) {
    const auto name = item.is_object() ? item.find("name") : item.end();
    const auto shape = item.is_object() ? item.find("shape") : item.end();
    if (!item.is_object() || name == item.end() || !name->is_string() || shape == item.end()) {
      refuse(path, "metadata \"variables\" holds an entry without a name and a shape");
    }
    const auto entry = entries.find(name->get<std::string>());
    if (entry == entries.end()) {
      refuse(path, fmt::format("metadata \"variables\" lists {}, which the header lacks",
                               quoted(name->get<std::string>())));
    }
    const auto optional = item.find("optional");
    if (optional != item.end() && !optional->is_boolean()) {
      refuse(path, fmt::format("metadata \"variables\" gives {} an \"optional\" that is not "
                               "true or false",
                               quoted(entry->first)));
    }
    entry->second.optional = optional != item.end() && optional->get<bool>();
    if (*shape != json(entry->second.shape.dims())) {
      refuse(path,
             fmt::format("tensor {} is {} in the header but {} in metadata \"variables\"",
                         quoted(entry->first), entry->second.shape.str(), quoted(shape->dump())));
    }
    if (entry->second.begin != at) {
      refuse(path, fmt::format("tensor {} starts at byte {} of the data, not {} where the tensor "
                               "listed before it ends (offsets out of order, overlapping or "
                               "with a gap)",
                               quoted(entry->first), entry->second.begin, at));
    }
    at = entry->second.end;
  }
  if (at != data_size) {
    refuse(path,
           fmt::format("the data section has {} bytes but the tensors cover {}", data_size, at));
  }
}

// "0.75,0.25": every item a finite decimal above 0, at most 4096 of them.
std::vector<double> parse_weights(const std::string& path, const std::string& text) {
  std::vector<double> weights;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? comma : comma - start);
    double w = 0;
    const char* last = item.data() + item.size();
    const auto [end, ec] = std::from_chars(item.data(), last, w);
    if (item.empty() || ec != std::errc() || end != last || !std::isfinite(w) || w <= 0 ||
        weights.size() == 4096) {
      refuse(path, fmt::format("metadata \"shard_weights\" is {}, not up to 4096 numbers above "
                               "0 joined by commas",
                               quoted(text)));
    }
    weights.push_back(w);
    if (comma == std::string::npos) return weights;
    start = comma + 1;
  }
}

const char* safetensors_dtype(DType dtype) {
  return dtype == DType::F16 ? "F16" : dtype == DType::BF16 ? "BF16" : "F32";
}

// A tensor's bytes in the data section: f32 values, or half bits (rounded)
// with no padding, as safetensors stores them.
std::vector<char> stored_bytes(const CheckpointTensor& t) {
  if (!is_half(t.dtype)) {
    const auto* bytes = reinterpret_cast<const char*>(t.values.data());
    return {bytes, bytes + t.values.size() * sizeof(float)};
  }
  const std::vector<std::uint16_t> bits = to_half(t.values, t.dtype);
  const auto* bytes = reinterpret_cast<const char*>(bits.data());
  return {bytes, bytes + bits.size() * sizeof(std::uint16_t)};
}

}  // namespace

std::vector<char> encode_checkpoint(const std::string& path,
                                    std::span<const CheckpointTensor> tensors,
                                    std::uint64_t global_step,
                                    std::span<const double> shard_weights) {
  json header = json::object();
  json listing = json::array();
  std::uint64_t size = 0;
  std::uint32_t data_crc = crc32_of({});
  std::vector<std::vector<char>> data;
  for (const CheckpointTensor& t : tensors) {
    if (static_cast<std::int64_t>(t.values.size()) != t.shape.elements() ||
        t.name == "__metadata__" || header.contains(t.name) || t.dtype == DType::I32) {
      throw Error(
          fmt::format("save_checkpoint('{}'): tensor {} is a duplicate, a reserved "
                      "name, or does not hold its shape's values",
                      path, quoted(t.name)));
    }
    data.push_back(stored_bytes(t));
    const std::uint64_t begin = size;
    size += data.back().size();
    header[t.name] = {{"dtype", safetensors_dtype(t.dtype)},
                      {"shape", t.shape.dims()},
                      {"data_offsets", {begin, size}}};
    listing.push_back({{"name", t.name}, {"shape", t.shape.dims()}});
    if (t.optional) listing.back()["optional"] = true;
    data_crc = crc32_of({data.back().data(), data.back().size()}, data_crc);
  }
  header["__metadata__"] = {{"format", kFormat},
                            {"global_step", std::to_string(global_step)},
                            {"crc32", std::to_string(data_crc)},
                            {"header_crc32", kCrcPlaceholder},
                            {"variables", listing.dump()}};
  if (!shard_weights.empty()) {
    std::vector<std::string> parts;
    for (const double w : shard_weights) parts.push_back(fmt::format("{}", w));
    header["__metadata__"]["shard_weights"] = fmt::format("{}", fmt::join(parts, ","));
  }
  std::string text = header.dump();
  // Pad with spaces (valid JSON) so the data section starts 8-byte aligned, as
  // the reference safetensors writer does.
  text.append((8 - text.size() % 8) % 8, ' ');

  std::vector<char> file(8 + text.size());
  const std::uint64_t n = text.size();
  std::memcpy(file.data(), &n, 8);
  std::memcpy(file.data() + 8, text.data(), text.size());
  const std::size_t digits = 8 + text.find(kHeaderCrcKey) + kHeaderCrcKey.size();
  const std::string crc = fmt::format("{:08x}", crc32_of(file));
  std::memcpy(file.data() + digits, crc.data(), crc.size());
  file.reserve(file.size() + size);
  for (const std::vector<char>& bytes : data) file.insert(file.end(), bytes.begin(), bytes.end());
  return file;
}

CheckpointFile::CheckpointFile(std::string path, std::vector<char> bytes, bool check_data,
                               bool any_safetensors)
    : CheckpointFile(std::move(path), std::move(bytes), std::nullopt, check_data, any_safetensors) {
}

CheckpointFile::CheckpointFile(std::string path, std::vector<char> bytes,
                               std::optional<std::uint64_t> file_size, bool check_data,
                               bool any_safetensors)
    : path_(std::move(path)), bytes_(std::move(bytes)), has_data_(!file_size) {
  if (!has_data_ && check_data) throw Error("internal: a checkpoint's data checked unread");
  const auto [header, header_size] =
      parse_header(path_, bytes_, file_size.value_or(bytes_.size()), any_safetensors);
  data_offset_ = 8 + header_size;
  const std::uint64_t data_size = file_size.value_or(bytes_.size()) - data_offset_;
  for (const auto& [name, value] : header.items()) {
    if (name != "__metadata__") {
      entries_.emplace(name, parse_entry(path_, name, value, data_size));
    }
  }
  if (!is_vktower(header)) {
    check_contiguous(path_, entries_, data_size);
    return;  // no checksum, no step: another program's file
  }
  const json& meta = header["__metadata__"];
  if (meta["format"] == kFormat) check_header_crc(path_, bytes_, header_size, meta);
  check_listing(path_, meta, entries_, data_size);
  const std::uint64_t crc =
      parse_decimal(path_, "crc32", metadata_string(path_, meta, "crc32"), 0xffffffffu);
  step_ = parse_decimal(path_, "global_step", metadata_string(path_, meta, "global_step"));
  if (meta.contains("shard_weights")) {
    shard_weights_ = parse_weights(path_, metadata_string(path_, meta, "shard_weights"));
  }
  if (!check_data) return;
  const std::uint32_t actual = crc32_of({bytes_.data() + data_offset_, data_size});
  if (crc != actual) {
    refuse(path_, fmt::format("the data section's crc32 is {} but the header records {} (the "
                              "file is corrupt)",
                              actual, crc));
  }
}

CheckpointFile CheckpointFile::read(const std::string& path, bool check_data,
                                    bool any_safetensors) {
  return CheckpointFile(path, read_whole_file(path), check_data, any_safetensors);
}

CheckpointFile CheckpointFile::read_header(const std::string& path, bool any_safetensors) {
  std::uint64_t file_size = 0;
  std::vector<char> head = read_file_header(path, file_size);
  return CheckpointFile(path, std::move(head), file_size, false, any_safetensors);
}

std::vector<float> CheckpointFile::values(const std::string& name) const {
  if (!has_data_) throw Error("internal: values() of a checkpoint read by read_header()");
  const CheckpointEntry& e = entries_.at(name);
  if (is_half(e.dtype)) {
    std::vector<std::uint16_t> bits(static_cast<std::size_t>(e.shape.elements()));
    std::memcpy(bits.data(), bytes_.data() + data_offset_ + e.begin, e.end - e.begin);
    return from_half(bits, e.dtype);
  }
  std::vector<float> out(static_cast<std::size_t>(e.shape.elements()));
  // Every entry holds at least one element: out.data() is never null here.
  std::memcpy(out.data(), bytes_.data() + data_offset_ + e.begin, e.end - e.begin);
  return out;
}

}  // namespace vkt::detail
