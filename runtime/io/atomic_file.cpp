#include "atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "../vulkan/error.h"

namespace vkt {
namespace {

// How to fix what `err` reports: a full disk and a file size limit call for
// different remedies, and the user reads only this line.
const char* remedy(int err) {
  switch (err) {
    case ENOSPC:
      return "free space on its filesystem (or give another directory)";
    case EDQUOT:
      return "free space or raise the disk quota";
    case EFBIG:
      return "the file is larger than the process's file size limit (ulimit -f) or the "
             "filesystem's largest file: raise the limit (or give another directory)";
    case EIO:
      return "the storage reported an I/O error: check the disk (dmesg) or give another directory";
    case EACCES:
    case EPERM:
    case EROFS:
      return "make the directory writable (or give another one)";
    default:
      return "check that the directory exists, is writable and has free space";
  }
}

[[noreturn]] void fail(const std::string& path, const char* what, int err) {
  throw FileWriteError(fmt::format("cannot write '{}': {} failed: {}; {}", path, what,
                                   std::strerror(err), remedy(err)));
}

// Closes the descriptor and removes the temporary file unless released, so a
// failed save leaves no partial file behind (a crash may; loaders ignore it).
struct TempFile {
  int fd = -1;
  std::string name;
  ~TempFile() {
    if (fd >= 0) ::close(fd);
    if (!name.empty()) ::unlink(name.c_str());
  }
};

void write_all(int fd, std::span<const char> bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(path, "write", errno);
    }
    // POSIX allows 0 for a regular file that takes no more bytes; retrying would spin.
    if (n == 0) fail(path, "write", ENOSPC);
    bytes = bytes.subspan(static_cast<std::size_t>(n));
  }
}

// A target's temporary file: its name, kTempMark, then mkstemp's six characters.
constexpr std::string_view kTempMark = ".tmp.";
constexpr std::string_view kTempRandom = "XXXXXX";

}  // namespace

std::string_view atomic_write_target(std::string_view file_name) {
  const std::size_t suffix = kTempMark.size() + kTempRandom.size();
  if (file_name.size() <= suffix) return {};
  const std::size_t mark = file_name.size() - suffix;
  if (file_name.substr(mark, kTempMark.size()) != kTempMark) return {};
  const std::string_view random = file_name.substr(mark + kTempMark.size());
  const bool alnum = std::all_of(random.begin(), random.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  });
  return alnum ? file_name.substr(0, mark) : std::string_view{};
}

void write_file_atomically(const std::string& path, std::span<const char> bytes) {
  const std::filesystem::path target(path);
  std::filesystem::path dir = target.parent_path();
  if (dir.empty()) dir = ".";
  // Same directory as the target: rename() is atomic only within a filesystem.
  std::string pattern =
      (dir / (target.filename().string() + std::string(kTempMark) + std::string(kTempRandom)))
          .string();
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');

  TempFile tmp;
  tmp.fd = ::mkstemp(name.data());
  if (tmp.fd < 0) fail(path, "creating a temporary file", errno);
  tmp.name = name.data();
  (void)::fchmod(tmp.fd, 0644);  // mkstemp makes 0600; a checkpoint is an ordinary file
  write_all(tmp.fd, bytes, path);
  // The data must be on disk before the rename makes it visible under `path`.
  if (::fsync(tmp.fd) != 0) fail(path, "fsync", errno);
  const int fd = tmp.fd;
  tmp.fd = -1;
  if (::close(fd) != 0) fail(path, "close", errno);
  if (::rename(tmp.name.c_str(), path.c_str()) != 0) fail(path, "rename", errno);
  tmp.name.clear();
  // The rename itself lives in the directory: sync it so it survives a power loss.
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dir_fd < 0) fail(path, "opening the directory", errno);
  const int rc = ::fsync(dir_fd);
  const int err = errno;
  ::close(dir_fd);
  if (rc != 0) fail(path, "fsync of the directory", err);
}

}  // namespace vkt
