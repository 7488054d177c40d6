// read_input_file: open without blocking, look at what the path is, then read.
#include "read_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

#include "file_descriptor.hpp"

namespace pipevm {

namespace {

std::string size_text(std::uint64_t bytes) {
  if (bytes < kMiB) return std::to_string(bytes) + " bytes";
  return std::to_string((bytes + kMiB - 1) / kMiB) + " MiB";
}

// Why a file of this type is refused; empty for a regular file.
std::string refusal(mode_t mode) {
  if (S_ISREG(mode)) return "";
  if (S_ISDIR(mode)) return "is a directory";
  if (S_ISFIFO(mode)) return "is a FIFO (named pipe), not a regular file";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "is a device, not a regular file";
  if (S_ISSOCK(mode)) return "is a socket, not a regular file";
  return "is not a regular file";
}

}  // namespace

bool read_input_file(const std::string& path, std::uint64_t max_bytes, std::string_view kind,
                     std::string& text, std::string& error) {
  // O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer.
  const FileDescriptor file(open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (file.get() < 0) {
    error = std::strerror(errno);
    return false;
  }
  struct stat status {};
  if (fstat(file.get(), &status) != 0) {
    error = std::strerror(errno);
    return false;
  }
  error = refusal(status.st_mode);
  if (!error.empty()) return false;
  const auto over_limit = [&](std::uint64_t size) {
    error = "is " + size_text(size) + ", over the " + size_text(max_bytes) + " limit for ";
    error += kind;
    return false;
  };
  const auto size = static_cast<std::uint64_t>(status.st_size);
  if (size > max_bytes) return over_limit(size);
  text.clear();
  text.reserve(size);
  std::array<char, 1 << 16> buffer{};
  for (;;) {
    const ssize_t n = read(file.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = std::strerror(errno);
      return false;
    }
    if (n == 0) break;
    text.append(buffer.data(), static_cast<std::size_t>(n));
    // The file may have grown since fstat.
    if (text.size() > max_bytes) return over_limit(text.size());
  }
  return true;
}

}  // namespace pipevm
