#include "safetensors_archive.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "../runtime/graph/half.h"
#include "../runtime/vulkan/error.h"
#include "json_strict.h"
#include "safetensors_header.h"

namespace vkt::models {
namespace {

using detail::json_quoted;
using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";

[[noreturn]] void refuse_index(const std::string& path, const std::string& problem) {
  throw Error(fmt::format("checkpoint index '{}': {}", path, problem));
}

// A shard named by the index: a plain file name in the index's directory, so
// that an index cannot make the reader open files elsewhere.
bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(std::string_view("/\\\0", 3)) == std::string::npos;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (!(in && text << in.rdbuf())) {
    refuse_index(path, "the file cannot be read (check the path and its permissions)");
  }
  return std::move(text).str();
}

// name -> shard file name, every name and file checked.
std::map<std::string, std::string> parse_weight_map(const std::string& path) {
  const json index =
      detail::parse_json_strict(read_text(path), fmt::format("checkpoint index '{}'", path));
  const auto map = index.is_object() ? index.find("weight_map") : index.end();
  if (map == index.end() || !map->is_object()) {
    refuse_index(path, "it has no \"weight_map\" object of entry name -> shard file");
  }
  std::map<std::string, std::string> weight_map;
  for (const auto& [name, shard] : map->items()) {
    if (!shard.is_string() || !is_plain_file_name(shard.get<std::string>())) {
      refuse_index(path, fmt::format("weight_map gives entry {} the shard {}, not a file name in "
                                     "the index's directory (no '/', '..' or absolute path)",
                                     json_quoted(name), json_quoted(shard.dump())));
    }
    weight_map.emplace(name, shard.get<std::string>());
  }
  if (weight_map.empty()) refuse_index(path, "its weight_map lists no entries");
  return weight_map;
}

// Every shard's entries, after checking that the index and the shards agree.
std::vector<SafetensorsEntry> open_shards(const std::string& path) {
  const std::map<std::string, std::string> weight_map = parse_weight_map(path);
  std::map<std::string, std::vector<std::string>> names_by_shard;
  for (const auto& [name, shard] : weight_map) names_by_shard[shard].push_back(name);
  const fs::path dir = fs::path(path).parent_path();
  std::vector<SafetensorsEntry> entries;
  for (const auto& [shard, names] : names_by_shard) {
    const std::string shard_path = (dir / shard).string();
    std::error_code ec;
    if (!fs::exists(shard_path, ec)) {
      refuse_index(path, fmt::format("weight_map names shard {} (for entry {}), which does not "
                                     "exist in {} (copy every shard beside the index)",
                                     json_quoted(shard), json_quoted(names.front()),
                                     json_quoted(dir.string())));
    }
    SafetensorsHeader header = read_safetensors_header(shard_path);
    for (SafetensorsEntry& e : header.entries) {
      const auto listed = weight_map.find(e.name);
      if (listed == weight_map.end() || listed->second != shard) {
        refuse_index(path, fmt::format("shard '{}' holds entry {}, which weight_map {} (a stale "
                                       "index: write the checkpoint again)",
                                       shard_path, json_quoted(e.name),
                                       listed == weight_map.end() ? "does not list"
                                                                  : "places in another shard"));
      }
      entries.push_back(std::move(e));
    }
    if (header.entries.size() != names.size()) {
      for (const std::string& name : names) {
        const auto in_shard = [&](const SafetensorsEntry& e) { return e.name == name; };
        if (std::none_of(header.entries.begin(), header.entries.end(), in_shard)) {
          refuse_index(path, fmt::format("weight_map places entry {} in shard '{}', which does "
                                         "not hold it (a stale index: write the checkpoint again)",
                                         json_quoted(name), shard_path));
        }
      }
    }
  }
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  return entries;
}

// The file a model path stands for.
std::string resolve(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return path;
  for (const char* name : {kSingleFile, kIndexFile}) {
    const fs::path candidate = fs::path(path) / name;
    if (fs::exists(candidate, ec)) return candidate.string();
  }
  throw Error(
      fmt::format("model directory '{}' has neither {} nor {} (download the model's "
                  "safetensors weights; .bin files are not read)",
                  path, kSingleFile, kIndexFile));
}

const SafetensorsEntry& value_entry(const SafetensorsArchive& archive, std::string_view name,
                                    bool half_only) {
  const SafetensorsEntry& e = archive.entry(name);
  const std::optional<DType> type = e.value_type();
  if (!type || (half_only && !is_half(*type))) {
    throw Error(fmt::format(
        "safetensors file '{}': entry {} has dtype {}; vktower reads {} "
        "(convert the checkpoint, e.g. to bf16)",
        e.file, json_quoted(e.name), e.dtype,
        half_only ? "16-bit words of F16 or BF16 entries only" : "F32, F16 and BF16 entries only"));
  }
  return e;
}

// Little-endian stored values as T (the host is little-endian: safetensors_header.cpp).
template <typename T>
std::vector<T> copied_as(const std::vector<char>& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

}  // namespace

SafetensorsArchive SafetensorsArchive::open(const std::string& path) {
  SafetensorsArchive archive;
  archive.path_ = resolve(path);
  if (archive.path_.ends_with(".json")) {
    archive.entries_ = open_shards(archive.path_);
  } else {
    archive.entries_ = read_safetensors_header(archive.path_).entries;
  }
  return archive;
}

const SafetensorsEntry* SafetensorsArchive::find(std::string_view name) const {
  const auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                                   [](const auto& e, std::string_view n) { return e.name < n; });
  return it != entries_.end() && it->name == name ? &*it : nullptr;
}

const SafetensorsEntry& SafetensorsArchive::entry(std::string_view name) const {
  const SafetensorsEntry* e = find(name);
  if (e == nullptr) {
    throw Error(
        fmt::format("checkpoint '{}' has no entry {} (is it a checkpoint of this "
                    "architecture, with Hugging Face names?)",
                    path_, json_quoted(name)));
  }
  return *e;
}

void SafetensorsArchive::check_shape(std::string_view name, std::span<const std::int64_t> expected,
                                     const std::string& source) const {
  const SafetensorsEntry& e = entry(name);
  if (!std::equal(e.shape.begin(), e.shape.end(), expected.begin(), expected.end())) {
    SafetensorsEntry wanted;
    wanted.shape.assign(expected.begin(), expected.end());
    throw Error(
        fmt::format("safetensors file '{}': entry {} has shape {} but {} gives {} (a "
                    "checkpoint of another model size?)",
                    e.file, json_quoted(e.name), e.shape_str(), source, wanted.shape_str()));
  }
}

std::vector<float> SafetensorsArchive::read_floats(std::string_view name) const {
  const SafetensorsEntry& e = value_entry(*this, name, false);
  const std::vector<char> bytes = read_entry_bytes(e);
  if (e.dtype == "F32") return copied_as<float>(bytes);
  return from_half(copied_as<std::uint16_t>(bytes), *e.value_type());
}

std::vector<std::uint16_t> SafetensorsArchive::read_half_bits(std::string_view name) const {
  const SafetensorsEntry& e = value_entry(*this, name, true);
  return copied_as<std::uint16_t>(read_entry_bytes(e));
}

}  // namespace vkt::models
