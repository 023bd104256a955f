#include "checkpoint.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <vector>

#include "../graph/graph.h"
#include "../vulkan/error.h"
#include "atomic_file.h"

// safetensors stores little-endian data; we copy host floats as they are.
static_assert(std::endian::native == std::endian::little,
              "checkpoints assume a little-endian host");

namespace vkt {
namespace {

using nlohmann::json;

constexpr const char* kFormat = "vktower";

std::uint32_t crc32_of(std::span<const char> data) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  // zlib takes uInt lengths: feed large sections in pieces.
  while (!data.empty()) {
    const std::size_t n = std::min<std::size_t>(data.size(), 1u << 30);
    crc = ::crc32(crc, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(n));
    data = data.subspan(n);
  }
  return static_cast<std::uint32_t>(crc);
}

std::string shape_str(const std::vector<std::int64_t>& dims) {
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

// The first problem found in a file; every message names the file.
[[noreturn]] void refuse(const std::string& path, const std::string& problem) {
  throw Error(fmt::format("checkpoint '{}' cannot be loaded: {}", path, problem));
}

std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) refuse(path, "the file cannot be opened (check the path and its permissions)");
  const std::streamoff size = in.tellg();
  std::vector<char> bytes(static_cast<std::size_t>(size));
  in.seekg(0);
  if (!in.read(bytes.data(), size)) refuse(path, "reading the file failed");
  return bytes;
}

// One tensor entry of the header, checked against the data section.
struct Entry {
  std::vector<std::int64_t> dims;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

Entry parse_entry(const std::string& path, const std::string& name, const json& j,
                  std::uint64_t data_size) {
  const std::string where = fmt::format("tensor '{}'", name);
  if (!j.is_object()) refuse(path, where + " is not a JSON object in the header");
  if (!j.contains("dtype") || j["dtype"] != "F32") {
    refuse(path, fmt::format("{} has dtype {}, expected \"F32\"", where,
                             j.contains("dtype") ? j["dtype"].dump() : "(none)"));
  }
  Entry e;
  const json& shape = j.value("shape", json());
  if (!shape.is_array()) refuse(path, where + " has no \"shape\" array");
  std::uint64_t elements = 1;
  for (const json& d : shape) {
    if (!d.is_number_unsigned()) refuse(path, where + " has a shape entry that is not a size");
    e.dims.push_back(d.get<std::int64_t>());
    elements *= d.get<std::uint64_t>();
  }
  const json& offsets = j.value("data_offsets", json());
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    refuse(path, where + " has no \"data_offsets\" [begin, end]");
  }
  e.begin = offsets[0].get<std::uint64_t>();
  e.end = offsets[1].get<std::uint64_t>();
  if (e.begin > e.end || e.end > data_size) {
    refuse(path, fmt::format("{} has data_offsets [{}, {}] outside the {}-byte data section (is "
                             "the file truncated?)",
                             where, e.begin, e.end, data_size));
  }
  if (e.end - e.begin != elements * sizeof(float)) {
    refuse(path, fmt::format("{} of shape {} needs {} bytes but its data_offsets span {}", where,
                             shape_str(e.dims), elements * sizeof(float), e.end - e.begin));
  }
  return e;
}

// The tensors must tile the data section exactly, as safetensors requires.
void check_layout(const std::string& path, const std::map<std::string, Entry>& entries,
                  std::uint64_t data_size) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
  for (const auto& [name, e] : entries) spans.emplace_back(e.begin, e.end);
  std::sort(spans.begin(), spans.end());
  std::uint64_t at = 0;
  for (const auto& [begin, end] : spans) {
    if (begin != at)
      refuse(path, fmt::format("tensor data overlaps or leaves a gap at byte {}", at));
    at = end;
  }
  if (at != data_size) {
    refuse(path,
           fmt::format("the data section has {} bytes but the tensors cover {}", data_size, at));
  }
}

std::string metadata_string(const std::string& path, const json& meta, const char* key) {
  if (!meta.contains(key) || !meta[key].is_string()) {
    refuse(path, fmt::format("the header metadata has no \"{}\" string", key));
  }
  return meta[key].get<std::string>();
}

std::uint64_t parse_u64(const std::string& path, const char* key, const std::string& text) {
  std::size_t used = 0;
  std::uint64_t v = 0;
  try {
    v = std::stoull(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || text[0] == '-') {
    refuse(path, fmt::format("metadata \"{}\" is \"{}\", not a decimal number", key, text));
  }
  return v;
}

// Names missing from the file, extra in it, or with another shape, listed.
void check_matches_graph(const std::string& path, std::span<Graph* const> graphs,
                         const std::map<std::string, Entry>& entries, CheckpointMatch match) {
  std::vector<std::string> missing, extra, reshaped;
  for (const Graph* graph : graphs) {
    for (const Variable& v : graph->variables()) {
      const auto it = entries.find(v.tensor.name());
      if (it == entries.end()) {
        missing.push_back(v.tensor.name());
      } else if (it->second.dims != v.tensor.shape().dims()) {
        reshaped.push_back(fmt::format("'{}' is {} in the file but {} in the graph",
                                       v.tensor.name(), shape_str(it->second.dims),
                                       v.tensor.shape().str()));
      }
    }
  }
  const auto in_a_graph = [&](const std::string& name) {
    return std::any_of(graphs.begin(), graphs.end(),
                       [&](const Graph* g) { return g->find_variable(name).has_value(); });
  };
  for (const auto& [name, e] : entries) {
    if (match == CheckpointMatch::Exact && !in_a_graph(name)) extra.push_back(name);
  }
  if (missing.empty() && extra.empty() && reshaped.empty()) return;
  std::string problem = "its variables do not match the graph's:";
  if (!reshaped.empty()) problem += fmt::format(" shape mismatch: {};", fmt::join(reshaped, "; "));
  if (!missing.empty()) {
    problem += fmt::format(" missing from the file: {};", fmt::join(missing, ", "));
  }
  if (!extra.empty())
    problem += fmt::format(" in the file but not the graph: {};", fmt::join(extra, ", "));
  problem.back() = '.';
  problem += " Build the same model (and optimizers) that wrote the checkpoint";
  refuse(path, problem);
}

}  // namespace

void save_checkpoint(Graph& graph, const std::string& path) {
  Graph* const graphs[] = {&graph};
  save_checkpoint(graphs, graph.global_step(), path);
}

void save_checkpoint(std::span<Graph* const> graphs, std::uint64_t global_step,
                     const std::string& path) {
  json header = json::object();
  json listing = json::array();
  std::vector<char> data;
  for (Graph* graph : graphs) {
    for (const Variable& v : graph->variables()) {
      const std::vector<float> values = graph->values(v.tensor);
      const std::size_t begin = data.size();
      data.resize(begin + values.size() * sizeof(float));
      std::memcpy(data.data() + begin, values.data(), values.size() * sizeof(float));
      header[v.tensor.name()] = {{"dtype", "F32"},
                                 {"shape", v.tensor.shape().dims()},
                                 {"data_offsets", {begin, data.size()}}};
      listing.push_back({{"name", v.tensor.name()}, {"shape", v.tensor.shape().dims()}});
    }
  }
  header["__metadata__"] = {{"format", kFormat},
                            {"global_step", std::to_string(global_step)},
                            {"crc32", std::to_string(crc32_of(data))},
                            {"variables", listing.dump()}};
  std::string text = header.dump();
  // Pad with spaces (valid JSON) so the data section starts 8-byte aligned, as
  // the reference safetensors writer does.
  text.append((8 - text.size() % 8) % 8, ' ');

  std::vector<char> file(8 + text.size() + data.size());
  std::uint64_t n = text.size();
  std::memcpy(file.data(), &n, 8);
  std::memcpy(file.data() + 8, text.data(), text.size());
  if (!data.empty()) std::memcpy(file.data() + 8 + text.size(), data.data(), data.size());
  write_file_atomically(path, file);
}

namespace {

/// The file's JSON header (checked to hold vktower's metadata) and its length.
std::pair<json, std::uint64_t> read_header(const std::string& path, const std::vector<char>& file) {
  if (file.size() < 8) {
    refuse(path, fmt::format("it has {} bytes, fewer than the 8-byte header length (is the file "
                             "truncated?)",
                             file.size()));
  }
  std::uint64_t header_size = 0;
  std::memcpy(&header_size, file.data(), 8);
  if (header_size > file.size() - 8) {
    refuse(path, fmt::format("its header length field says {} bytes but the file has only {} "
                             "after it (is the file truncated, or not a safetensors file?)",
                             header_size, file.size() - 8));
  }
  json header;
  try {
    header =
        json::parse(file.begin() + 8, file.begin() + 8 + static_cast<std::ptrdiff_t>(header_size));
  } catch (const json::exception& e) {
    refuse(path, fmt::format("its header is not valid JSON ({})", e.what()));
  }
  if (!header.is_object()) refuse(path, "its header is not a JSON object");
  if (!header.contains("__metadata__") || !header["__metadata__"].is_object()) {
    refuse(path, "its header has no \"__metadata__\" object (not written by vktower?)");
  }
  const std::string format = metadata_string(path, header["__metadata__"], "format");
  if (format != kFormat) {
    refuse(path, fmt::format("metadata \"format\" is \"{}\", expected \"{}\"", format, kFormat));
  }
  return {std::move(header), header_size};
}

}  // namespace

std::uint64_t checkpoint_global_step(const std::string& path) {
  const auto [header, header_size] = read_header(path, read_file(path));
  return parse_u64(path, "global_step",
                   metadata_string(path, header["__metadata__"], "global_step"));
}

void load_checkpoint(Graph& graph, const std::string& path, CheckpointMatch match) {
  Graph* const graphs[] = {&graph};
  load_checkpoint(graphs, path, match);
}

namespace {

/// A file read and checked whole: header, layout, checksum and step.
struct CheckedFile {
  std::vector<char> bytes;
  std::span<const char> data;
  std::map<std::string, Entry> entries;
  std::uint64_t step = 0;

  std::vector<float> values(const std::string& name) const {
    const Entry& e = entries.at(name);
    std::vector<float> out((e.end - e.begin) / sizeof(float));
    std::memcpy(out.data(), data.data() + e.begin, e.end - e.begin);
    return out;
  }
};

CheckedFile read_checked(const std::string& path) {
  CheckedFile f;
  f.bytes = read_file(path);
  const auto [header, header_size] = read_header(path, f.bytes);
  const json& meta = header["__metadata__"];
  f.data =
      std::span<const char>(f.bytes.data() + 8 + header_size, f.bytes.size() - 8 - header_size);
  for (const auto& [name, value] : header.items()) {
    if (name != "__metadata__") f.entries[name] = parse_entry(path, name, value, f.data.size());
  }
  check_layout(path, f.entries, f.data.size());
  const std::uint64_t crc = parse_u64(path, "crc32", metadata_string(path, meta, "crc32"));
  const std::uint32_t actual = crc32_of(f.data);
  if (crc != actual) {
    refuse(path, fmt::format("the data section's crc32 is {} but the header records {} (the file "
                             "is corrupt)",
                             actual, crc));
  }
  f.step = parse_u64(path, "global_step", metadata_string(path, meta, "global_step"));
  return f;
}

}  // namespace

void load_checkpoint(std::span<Graph* const> graphs, const std::string& path,
                     CheckpointMatch match) {
  const CheckedFile file = read_checked(path);
  check_matches_graph(path, graphs, file.entries, match);
  // Everything is checked: from here on nothing can refuse the file.
  for (Graph* graph : graphs) {
    for (const Variable& v : graph->variables()) {
      graph->assign(v.tensor, file.values(v.tensor.name()));
    }
    graph->set_global_step(file.step);
  }
}

std::map<std::string, HostTensor> read_checkpoint(const std::string& path) {
  const CheckedFile file = read_checked(path);
  std::map<std::string, HostTensor> out;
  for (const auto& [name, entry] : file.entries) {
    out[name] = HostTensor::floats(Shape(entry.dims), file.values(name));
  }
  return out;
}

}  // namespace vkt
