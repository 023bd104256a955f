#include "safetensors_writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

#include "../runtime/graph/half.h"
#include "../runtime/io/atomic_file.h"
#include "../runtime/vulkan/error.h"
#include "json_strict.h"
#include "safetensors_entry.h"

namespace vkt::models {
namespace {

using detail::json_quoted;
using nlohmann::json;
namespace fs = std::filesystem;

[[noreturn]] void refuse(const std::string& path, const TensorToWrite& t,
                         const std::string& problem) {
  throw Error(fmt::format("writing '{}': tensor {} {}", path, json_quoted(t.name), problem));
}

std::uint64_t elements_of(const std::string& path, const TensorToWrite& t) {
  std::uint64_t n = 1;
  for (const std::int64_t d : t.shape) {
    if (d < 0 || __builtin_mul_overflow(n, static_cast<std::uint64_t>(d), &n)) {
      refuse(path, t, "has a negative dimension or too many elements");
    }
  }
  return n;
}

// The tensor's stored bytes: f32 values, half words as given, or values rounded.
std::vector<char> stored_bytes(const std::string& path, const TensorToWrite& t) {
  const std::uint64_t n = elements_of(path, t);
  const auto as_bytes = [](const auto& v) {
    const auto* p = reinterpret_cast<const char*>(v.data());
    return std::vector<char>(p, p + v.size() * sizeof(v[0]));
  };
  if (t.dtype == DType::F32 && t.values.size() == n && t.half_bits.empty()) {
    return as_bytes(t.values);
  }
  if (is_half(t.dtype) && t.values.empty() && t.half_bits.size() == n) return as_bytes(t.half_bits);
  if (is_half(t.dtype) && t.values.size() == n && t.half_bits.empty()) {
    return as_bytes(to_half(t.values, t.dtype));
  }
  refuse(path, t,
         fmt::format("is {} of {} elements but holds {} values and {} half words (give "
                     "exactly one of them, half words for F16/BF16 only; I32 is not "
                     "written)",
                     to_string(t.dtype), n, t.values.size(), t.half_bits.size()));
}

std::vector<const TensorToWrite*> sorted_by_name(const std::string& path,
                                                 std::span<const TensorToWrite> tensors) {
  std::vector<const TensorToWrite*> sorted;
  for (const TensorToWrite& t : tensors) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->name < b->name; });
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i]->name.empty() || sorted[i]->name == "__metadata__" ||
        (i > 0 && sorted[i]->name == sorted[i - 1]->name)) {
      refuse(path, *sorted[i], "is empty, reserved (__metadata__) or given twice");
    }
  }
  return sorted;
}

// The bytes one tensor takes in the data section, without encoding it.
std::uint64_t data_bytes(const std::string& path, const TensorToWrite& t) {
  return elements_of(path, t) * dtype_bytes(t.dtype);
}

// The file of `sorted` tensors (sorted_by_name's order).
std::vector<char> encode_sorted(const std::string& path,
                                std::span<const TensorToWrite* const> sorted,
                                const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  std::vector<std::vector<char>> data;
  std::uint64_t size = 0;
  for (const TensorToWrite* t : sorted) {
    data.push_back(stored_bytes(path, *t));
    header[t->name] = {{"dtype", safetensors_dtype_name(t->dtype)},
                       {"shape", t->shape},
                       {"data_offsets", {size, size + data.back().size()}}};
    size += data.back().size();
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  // Spaces (valid JSON) so that the data section starts 8-byte aligned.
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<char> file(8 + text.size());
  const std::uint64_t length = text.size();
  std::memcpy(file.data(), &length, 8);
  std::memcpy(file.data() + 8, text.data(), text.size());
  file.reserve(file.size() + size);
  for (const std::vector<char>& bytes : data) file.insert(file.end(), bytes.begin(), bytes.end());
  return file;
}

// What transformers writes as a safetensors file's metadata.
const std::map<std::string, std::string> kPtMetadata{{"format", "pt"}};

void remove_stale(const fs::path& file) {
  std::error_code ec;
  fs::remove(file, ec);  // absent is fine; a failure leaves a file this write supersedes
}

}  // namespace

std::vector<char> encode_safetensors(const std::string& path,
                                     std::span<const TensorToWrite> tensors,
                                     const std::map<std::string, std::string>& metadata) {
  return encode_sorted(path, sorted_by_name(path, tensors), metadata);
}

void write_safetensors_file(const std::string& path, std::span<const TensorToWrite> tensors) {
  write_file_atomically(path, encode_safetensors(path, tensors, kPtMetadata));
}

std::vector<std::string> write_checkpoint(const std::string& directory,
                                          std::span<const TensorToWrite> tensors,
                                          const CheckpointWriteOptions& options) {
  const fs::path dir(directory);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    throw FileWriteError(
        fmt::format("writing checkpoint '{}': cannot create the directory ({}); "
                    "check the path and its permissions",
                    directory, ec.message()));
  }
  // Shards as transformers cuts them: tensors in order until the next would
  // exceed the limit.
  std::vector<std::vector<const TensorToWrite*>> shards;
  std::uint64_t shard_bytes = 0, total = 0;
  for (const TensorToWrite* t : sorted_by_name(directory, tensors)) {
    const std::uint64_t bytes = data_bytes(directory, *t);
    if (shards.empty() || (shard_bytes > 0 && shard_bytes + bytes > options.max_shard_bytes)) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(t);
    shard_bytes += bytes;
    total += bytes;
  }
  if (shards.size() <= 1) {
    if (shards.empty()) shards.emplace_back();  // a checkpoint of no tensors is one file
    const std::string path = (dir / "model.safetensors").string();
    write_file_atomically(path, encode_sorted(path, shards[0], kPtMetadata));
    remove_stale(dir / "model.safetensors.index.json");
    return {"model.safetensors"};
  }
  std::vector<std::string> written;
  json weight_map = json::object();
  for (std::size_t i = 0; i < shards.size(); ++i) {
    written.push_back(fmt::format("model-{:05}-of-{:05}.safetensors", i + 1, shards.size()));
    const std::string path = (dir / written.back()).string();
    write_file_atomically(path, encode_sorted(path, shards[i], kPtMetadata));
    for (const TensorToWrite* t : shards[i]) weight_map[t->name] = written.back();
  }
  const json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  const std::string text = index.dump(2) + "\n";
  write_file_atomically((dir / "model.safetensors.index.json").string(), text);
  written.push_back("model.safetensors.index.json");
  remove_stale(dir / "model.safetensors");
  return written;
}

}  // namespace vkt::models
