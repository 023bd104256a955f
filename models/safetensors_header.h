#pragma once
// Checked decoding of one safetensors file's header (host only; the archive and
// the fuzz target run exactly this). The file is untrusted: its length field,
// JSON, every entry's dtype, shape and offsets are checked before any data is
// read, each problem a one-line vkt::Error naming the file (and the entry).
//
// Layout: a u64 little-endian header length N, N bytes of a JSON object
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__":
// {string: string}} (padded with spaces), then the data section; offsets are
// relative to the data section, and the entries tile it exactly.

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "safetensors_entry.h"

namespace vkt::models {

/// The largest header read (as the safetensors format caps it): a length field
/// beyond it is a damaged file, not a reason to allocate gigabytes.
inline constexpr std::uint64_t kMaxSafetensorsHeaderBytes = 100u << 20;

/// A safetensors file's header, checked.
struct SafetensorsHeader {
  /// Sorted by name.
  std::vector<SafetensorsEntry> entries;
  /// "__metadata__" (e.g. {"format": "pt"}); empty when there is none.
  std::map<std::string, std::string> metadata;
};

/// The header length a file of `file_size` bytes gives in its first 8 bytes
/// (`first_bytes`, as many as the file has up to 8). Throws vkt::Error naming
/// `path` for a file under 8 bytes or a length beyond the file or the cap.
std::uint64_t safetensors_header_length(const std::string& path, std::span<const char> first_bytes,
                                        std::uint64_t file_size);

/// Decodes `header_json` (the N header bytes of `path`, a file of `file_size`
/// bytes): every entry's dtype, shape (element and byte counts checked for
/// overflow) and data_offsets (begin <= end, within the data section, spanning
/// exactly its bytes, the entries tiling the section), names unique. Throws
/// vkt::Error naming `path` and the entry.
SafetensorsHeader parse_safetensors_header(const std::string& path, std::string_view header_json,
                                           std::uint64_t file_size);

/// Reads and checks the header of the file at `path` (the data stays unread).
SafetensorsHeader read_safetensors_header(const std::string& path);

/// The bytes of `entry` read from its file (a seek and one read, not the
/// whole file). Throws vkt::Error naming the file and entry when the read fails.
std::vector<char> read_entry_bytes(const SafetensorsEntry& entry);

}  // namespace vkt::models
