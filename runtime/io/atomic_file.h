#pragma once
// Crash-safe file replacement, shared by checkpoints and their index file.

#include <span>
#include <string>

namespace vkt {

/// Replaces `path` with `bytes` so that a reader (or a process restarted after
/// a crash at any moment) sees either the old file or the new one, never a mix:
/// writes a temporary file in the same directory, fsyncs it, renames it over
/// `path` and fsyncs the directory. Throws vkt::Error naming the file and the
/// failing system call.
void write_file_atomically(const std::string& path, std::span<const char> bytes);

}  // namespace vkt
