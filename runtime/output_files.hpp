// Output files that survive a crash, and outputs checked before a long run.
//
// write_file_durably: a reader (or a machine that loses power) sees the old
// file or the whole new one, never half of it: the bytes go to a temporary
// file in the same directory, which is fsynced, renamed into place, and the
// directory is fsynced so that the rename itself is on disk.
//
// why_not_writable_*: whether an output path can be written, checked for
// real by creating and removing a temporary file where the output will go
// (root passes every permission bit, so access(2) would say yes to a
// read-only file system or /sys).
// Leaves out: locking between processes, the semantics of fsync on network
// file systems, files larger than memory.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>

namespace pipevm::runtime {

// A file system call failed; the message names the path and strerror's reason.
class FileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Replaces `path` with `bytes`, atomically and durably. Throws FileError.
void write_file_durably(const std::string& path, std::span<const std::byte> bytes);

// fsyncs a directory, so that the entries created or renamed in it survive a
// crash. Throws FileError.
void sync_directory(const std::string& directory);

// The whole file. Throws FileError.
std::string read_whole_file(const std::string& path);

// Why `path` cannot be written as an output file, or nothing when it can. It
// may be missing or an existing regular file that opens for writing (its
// contents untouched); either way its directory must take a new file.
std::optional<std::string> why_not_writable_file(const std::string& path);

// Why `directory` cannot hold outputs, or nothing when it can. A missing
// directory is created (with its parents) first; it must then take a new file.
std::optional<std::string> why_not_writable_directory(const std::string& directory);

}  // namespace pipevm::runtime
