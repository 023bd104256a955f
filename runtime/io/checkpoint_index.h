#pragma once
// The index file of a model directory (internal): which checkpoints a
// CheckpointManager keeps, oldest first. Host side only, so it can be fuzzed.
//
//   {"latest": "ckpt-30.safetensors", "all": ["ckpt-20.safetensors", "ckpt-30.safetensors"]}

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vkt::detail {

/// The file name of the checkpoint of `step`: ckpt-<step>.safetensors.
std::string checkpoint_file_name(std::uint64_t step);
/// True for checkpoint_file_name(step) of some step, exactly (no leading zeros).
bool is_checkpoint_file_name(std::string_view name);

/// The checkpoint file names `text` (the contents of the index file `path`)
/// lists, oldest first. Each must be a checkpoint_file_name (never a path: the
/// manager deletes the oldest), listed once, and "latest" must be the last.
/// Anything else is a vkt::Error naming `path`.
std::vector<std::string> parse_checkpoint_index(const std::string& text, const std::string& path);

/// The index text for `all` (oldest first).
std::string format_checkpoint_index(const std::vector<std::string>& all);

}  // namespace vkt::detail
