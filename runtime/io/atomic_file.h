#pragma once
// Crash-safe file replacement, shared by checkpoints and their index file.

#include <span>
#include <string>
#include <string_view>

#include "../vulkan/error.h"

namespace vkt {

/// A file that could not be written (a full disk, a file size limit, an I/O
/// error, a directory that is not writable); the message names the file, the
/// failed call, its strerror and what to do. A type of its own so that a
/// caller can tell a failed write from, say, a lost device during a save.
class FileWriteError : public Error {
 public:
  using Error::Error;
};

/// Replaces `path` with `bytes` so that a reader (or a process restarted after
/// a crash at any moment) sees either the old file or the new one, never a mix:
/// writes a temporary file in the same directory, fsyncs it, renames it over
/// `path` and fsyncs the directory. Throws FileWriteError naming the file, the
/// failing system call, its strerror and what to do (free space, raise the file
/// size limit). A failure before the rename (a write, fsync or close: ENOSPC,
/// EFBIG, EIO) leaves `path` as it was and removes the temporary file; only the
/// directory's fsync fails after the rename, with the new file in place.
void write_file_atomically(const std::string& path, std::span<const char> bytes);

/// If `file_name` is the temporary file write_file_atomically makes for a
/// target in the same directory (target + ".tmp." + six letters or digits),
/// that target's name; else empty. Such a file outlives only a process killed
/// mid-write (every failure the call reports removes its own).
std::string_view atomic_write_target(std::string_view file_name);

}  // namespace vkt
